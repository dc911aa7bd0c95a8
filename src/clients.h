/* Client connections: open and close (7.2), input ended (SB-I-5,
 * SB-I-41), the listener and its accept() failures (SB-I-18), closing
 * clients (SB-X-14). */
#ifndef SB_CLIENTS_H
#define SB_CLIENTS_H

#include "bus.h"
#include "cli.h"

#include <stdbool.h>
#include <stdint.h>

sb_peer *sb_clients_open(sb_bus *d, int in_fd, int out_fd);
void sb_clients_close(sb_bus *d, sb_peer *c);
bool sb_clients_has_pending(const sb_bus *d, const sb_peer *c);
void sb_clients_close_ended(sb_bus *d, int64_t now);
void sb_clients_input_eof(sb_bus *d, sb_peer *p);
void sb_clients_check_closing(sb_bus *d, int64_t now);
int64_t sb_clients_closing_deadline(const sb_bus *d, int64_t next);
int sb_clients_start(sb_bus *d, const sb_options *opt);
#endif
