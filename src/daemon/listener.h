/* The listening socket of the unix and tcp modes: accept() and its
 * failures (SB-I-18), connections beyond MAX_CONNECTIONS refused. */
#ifndef SB_LISTENER_H
#define SB_LISTENER_H

#include "bus.h"
#include "cli.h"

/* Listens on opt->address (unix or tcp) and watches for connections.
 * Returns 0 or STDIO_BUS_ERR (logged). */
int sb_listener_start(sb_bus *d, const sb_options *opt);
/* The listener's rest after failed accept()s is over. */
void sb_listener_resume(sb_bus *d);
/* At the end of each round. SB-X-21: connections waiting for a
 * per_connection slot are accepted again when one is free; SB-X-23: while
 * none is, room is made for them as soon as a worker retires. */
void sb_listener_slot_freed(sb_bus *d);

#endif
