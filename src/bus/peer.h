/* A peer of the daemon: one client connection or one worker's stdio pipes.
 * Both sides have the same shape for the routing core: an input framed into
 * lines (sb_frame) and an output queue (sb_outq), so backpressure (7.3.1)
 * and overflow (7.3.2) work the same way in both directions. */
#ifndef SB_PEER_H
#define SB_PEER_H

#include "frame.h"
#include "loop.h"
#include "outq.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum { SB_PEER_FREE = 0, SB_PEER_CLIENT, SB_PEER_WORKER } sb_peer_kind;

/* A client's life; changed only by sb_client_enter (client_state.c), which
 * says which transitions there are. Workers stay SB_CLIENT_FREE: theirs is
 * sb_worker_state (Appendix B). Pausing by backpressure (blocked_on) and a
 * full output (full_since_ms) are not states: both kinds of peer have them,
 * in any state. */
typedef enum {
    SB_CLIENT_FREE = 0, /* the slot holds no client */
    SB_CLIENT_OPEN,     /* read and routed */
    SB_CLIENT_HELD,     /* SB-I-45: its next line waits for its id to be free; not read */
    SB_CLIENT_ENDING,   /* its input ended (SB-I-41, SB-I-5): answers owed */
    SB_CLIENT_CLOSING,  /* SB-X-14: its worker exited: not read, closed once out is written */
    SB_CLIENT_DOOMED    /* closed at the end of the round */
} sb_client_state;

typedef struct sb_peer {
    sb_peer_kind kind;
    int index;  /* router id: client slot or worker id */
    int in_fd;  /* client socket / stdin; worker stdout; -1 when closed */
    int out_fd; /* client socket / stdout; worker stdin; -1 when closed */
    sb_frame in;
    sb_outq out;
    struct sb_peer *blocked_on; /* SB-7.3.1-1: paused until this output drains */
    int waiters; /* inputs paused on this output, or more (one that closed while paused) */
    int64_t full_since_ms;      /* SB-7.3.1-2: when out went over its cap; 0 = not */
    sb_client_state state;      /* clients only: see sb_client_enter */
    bool in_eof;                /* its input reached its end (a held client keeps its line) */
    bool queued;                /* on the ready list: has buffered lines to process */
    bool active;                /* read since the last idle sweep */
    bool dirty;                 /* on the flush list: out has bytes not yet tried */
    bool in_parked;             /* in_fd taken off the loop: hung up while paused */
    bool share_warned;          /* client: SB-I-51 said, until a request of it is recorded again */
    bool upstream_warned;       /* client: SB-I-52 said, until a worker request to it is recorded */
    int held_why;               /* client in SB_CLIENT_HELD: why (an sb_route_why) */
    int64_t bind_wait_since_ms; /* client: unbound, waiting for a worker of its own (SB-X-24) */
    size_t counted;             /* client: the bytes of its buffers in d->client_bytes (SB-X-17) */
    /* client, under limits.max_client_memory (SB-X-17): since when it has
     * held an unfinished line, and output it has not read (0: none); the
     * latter is reset once it has read unread_mark bytes of its queue */
    int64_t unfinished_since_ms;
    int64_t unread_since_ms;
    uint64_t unread_mark;
    char name[64]; /* log context */
    /* its owner's loop handler (client connections / worker supervision) */
    sb_loop_fn on_event;
} sb_peer;

#endif
