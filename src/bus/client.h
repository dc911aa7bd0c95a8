/* A client connection (7.2): the I/O part it shares with workers (sb_peer)
 * and what only a client has. Its state changes in client_state.c only. */
#ifndef SB_CLIENT_H
#define SB_CLIENT_H

#include "client_life.h"
#include "peer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sb_client {
    sb_peer peer; /* in_fd, out_fd: its socket, or stdin and stdout */
    sb_client_state state;
    bool active;                /* read since the last idle sweep */
    int held_why;               /* in SB_CLIENT_HELD: why (an sb_route_why) */
    bool share_warned;          /* SB-I-51 said, until a request of it is recorded again */
    bool upstream_warned;       /* SB-I-52 said, until a worker request to it is recorded */
    int64_t bind_wait_since_ms; /* unbound, waiting for a worker of its own (SB-X-24) */
    size_t counted;             /* the bytes of its buffers in d->client_bytes (SB-X-17) */
    /* under limits.max_client_memory (SB-X-17): since when it has held an
     * unfinished line, and output it has not read (0: none); the latter is
     * reset once it has read unread_mark bytes of its queue */
    int64_t unfinished_since_ms;
    int64_t unread_since_ms;
    uint64_t unread_mark;
} sb_client;

#endif
