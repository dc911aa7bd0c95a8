/* A peer of the daemon: the I/O part of one client connection (sb_client,
 * client.h) or of one worker's stdio pipes (sb_worker, worker.h), which
 * each embed it. Both sides have the same shape for the routing core: an
 * input framed into lines (sb_frame) and an output queue (sb_outq), so
 * backpressure (7.3.1) and overflow (7.3.2) work the same way in both
 * directions. What only one kind has lives in its own type. */
#ifndef SB_PEER_H
#define SB_PEER_H

#include "client_life.h"
#include "frame.h"
#include "loop.h"
#include "outq.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum { SB_PEER_FREE = 0, SB_PEER_CLIENT, SB_PEER_WORKER } sb_peer_kind;

typedef struct sb_peer {
    sb_peer_kind kind;
    /* what the relay asks of every peer, read where it is kept: its client's
     * sb_client.state, or for a worker a constant SB_CLIENT_FREE (its own
     * state is its sb_worker_state) */
    const sb_client_state *client_state;
    int index;  /* router id: client slot or worker id (where its sb_client, sb_worker is) */
    int in_fd;  /* client socket / stdin; worker stdout; -1 when closed */
    int out_fd; /* client socket / stdout; worker stdin; -1 when closed */
    sb_frame in;
    sb_outq out;
    struct sb_peer *blocked_on; /* SB-7.3.1-1: paused until this output drains */
    int waiters; /* inputs paused on this output, or more (one that closed while paused) */
    int64_t full_since_ms; /* SB-7.3.1-2: when out went over its cap; 0 = not */
    bool in_eof;           /* its input reached its end (a held client keeps its line) */
    bool queued;           /* on the ready list: has buffered lines to process */
    bool dirty;            /* on the flush list: out has bytes not yet tried */
    bool in_parked;        /* in_fd taken off the loop: hung up while paused */
    char name[64];         /* log context */
    /* its owner's loop handler (client connections / worker supervision) */
    sb_loop_fn on_event;
} sb_peer;

/* p's client state; a worker's is SB_CLIENT_FREE (its own is its
 * sb_worker_state), so the relay asks the same question of every peer. */
static inline sb_client_state sb_peer_client_state(const sb_peer *p) {
    return *p->client_state;
}

#endif
