/* Client connections: open and close (7.2), input ended (SB-I-5,
 * SB-I-41), what the relay reports of their input, their timers, the
 * stdio client; the listener is listener.c. */
#ifndef SB_CLIENTS_H
#define SB_CLIENTS_H

#include "bus.h"
#include "relay.h"

#include <stdbool.h>
#include <stdint.h>

sb_client *sb_clients_open(sb_bus *d, int in_fd, int out_fd);
void sb_clients_close(sb_bus *d, sb_client *c);
bool sb_clients_has_pending(const sb_bus *d, const sb_client *c);
void sb_clients_close_ended(sb_bus *d);
void sb_clients_input_eof(sb_bus *d, sb_client *c);
/* Acts on what the relay reported for the client's input (relay.h). */
void sb_clients_verdict(sb_bus *d, sb_client *c, sb_relay_verdict v);
/* A client's timer (SB_TIMER_FULL, _HELD, _ENDING, _CLOSING) fired. */
void sb_clients_timer(sb_bus *d, sb_client *c, int which, int64_t now);
int sb_clients_start_stdio(sb_bus *d);
void sb_clients_enforce_budget(sb_bus *d);

#endif
