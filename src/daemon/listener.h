/* The listening socket of the unix and tcp modes: accept() and its
 * failures (SB-I-18), connections beyond MAX_CONNECTIONS refused. */
#ifndef SB_LISTENER_H
#define SB_LISTENER_H

#include "bus.h"
#include "cli.h"
#include "net.h"

typedef struct {
    int fd;                /* -1 = none (stdio mode, or closed at shutdown) */
    int spare_fd;          /* /dev/null, given up to accept-and-close when out of fds */
    bool accept_failing;   /* an episode of failed accept()s is going on */
    long accept_refused;   /* connections closed unserved in that episode */
    bool waiting_for_slot; /* SB-X-21: accepting waits for a per_connection slot */
    const char *unix_path;
    sb_net_unix_id unix_id; /* the socket file we bound (SB-I-22) */
} sb_listener;

/* No socket yet: what ln must hold before sb_listener_start, or without it
 * (stdio mode). */
void sb_listener_init(sb_listener *ln);
/* Listens on opt->address (unix or tcp) and watches for connections on
 * d's loop. Returns 0 or STDIO_BUS_ERR (logged). */
int sb_listener_start(sb_listener *ln, sb_bus *d, const sb_options *opt);
/* The listener's rest after failed accept()s is over. */
void sb_listener_resume(sb_listener *ln, sb_bus *d);
/* At the end of each round. SB-X-21: connections waiting for a
 * per_connection slot are accepted again when one is free; SB-X-23: while
 * none is, room is made for them as soon as a worker retires. */
void sb_listener_slot_freed(sb_listener *ln, sb_bus *d);

#endif
