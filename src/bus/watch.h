/* What a peer's fds are watched for in the loop: its input while it may
 * be read (by its client state, or for a worker whether its state routes
 * its output), its output while bytes are queued. */
#ifndef SB_WATCH_H
#define SB_WATCH_H

#include "bus.h"

#include <stdbool.h>

/* Watches p's fds for what it may do now: read unless paused, held,
 * ending, closing or (clients) shut down; write while its queue holds
 * bytes. */
void sb_watch_update(sb_bus *d, sb_peer *p);
/* A paused input that hangs up is taken off the loop until it resumes.
 * Returns true when p's input is paused: the event is absorbed. */
bool sb_watch_park_if_paused(sb_bus *d, sb_peer *p, int fd, short revents);

#endif
