/* The relay path: read -> frame -> route -> queue -> flush, with
 * backpressure (7.3.1), input overflow (7.3.2) and the per-round lists
 * (ready, held, doomed, dirty). Routing decisions come from router.c;
 * this file does the I/O and the logging around them. */
#ifndef SB_RELAY_H
#define SB_RELAY_H

#include "bus.h"

#include <stdbool.h>
#include <stddef.h>

void sb_relay_update_interest(sb_bus *d, sb_peer *p);
bool sb_relay_park_if_paused(sb_bus *d, sb_peer *p, int fd, short revents);
void sb_relay_mark_ready(sb_bus *d, sb_peer *p);
void sb_relay_unhold(sb_bus *d, sb_peer *c);
void sb_relay_release_held(sb_bus *d);
void sb_relay_doom(sb_bus *d, sb_peer *p);
void sb_relay_release_waiters(sb_bus *d, sb_peer *out);
void sb_relay_set_full(sb_bus *d, sb_peer *p, bool full);
void sb_relay_send(sb_bus *d, sb_peer *p, const char *line, size_t len, sb_peer *from);
void sb_relay_flush(sb_bus *d);
void sb_relay_send_error(sb_bus *d, sb_peer *client, const char *id, size_t id_len, const char *sid,
                         size_t sid_len, const char *why);
int sb_relay_process(sb_bus *d, sb_peer *p);
void sb_relay_overflow(sb_bus *d, sb_peer *p);
int sb_relay_read(sb_bus *d, sb_peer *p);
void sb_relay_close_if_flushed(sb_bus *d, sb_peer *c);

#endif
