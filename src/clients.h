/* Client connections: open and close (7.2), input ended (SB-I-5,
 * SB-I-41), the listener and its accept() failures (SB-I-18), closing
 * clients (SB-X-14). */
#ifndef SB_CLIENTS_H
#define SB_CLIENTS_H

#include "bus.h"
#include "cli.h"
#include "relay.h"

#include <stdbool.h>
#include <stdint.h>

sb_peer *sb_clients_open(sb_bus *d, int in_fd, int out_fd);
void sb_clients_close(sb_bus *d, sb_peer *c);
bool sb_clients_has_pending(const sb_bus *d, const sb_peer *c);
void sb_clients_close_ended(sb_bus *d);
void sb_clients_input_eof(sb_bus *d, sb_peer *p);
/* Acts on what the relay reported for the client's input (relay.h). */
void sb_clients_verdict(sb_bus *d, sb_peer *c, sb_relay_verdict v);
/* A client's timer (SB_TIMER_FULL, _HELD, _ENDING, _CLOSING) fired. */
void sb_clients_timer(sb_bus *d, sb_peer *c, int which, int64_t now);
/* The listener's rest after failed accept()s is over. */
void sb_clients_resume_accept(sb_bus *d);
int sb_clients_start(sb_bus *d, const sb_options *opt);
void sb_clients_enforce_budget(sb_bus *d);

#endif
