/* The daemon's shared state: what the relay path (relay.c), the client
 * connections (clients.c), worker supervision (supervise.c) and the
 * daemon's phases and loop (daemon.c) all read. One daemon per process. */
#ifndef SB_BUS_H
#define SB_BUS_H

#include "cli.h"
#include "client_table.h"
#include "config.h"
#include "loop.h"
#include "peer.h"
#include "round.h"
#include "router.h"
#include "timers.h"
#include "worker.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How a client ends, as supervision is told (sb_bus.client_end) */
typedef enum {
    SB_CLIENT_END_INPUT,  /* its input ended, all of it forwarded (ENDING) */
    SB_CLIENT_END_DOOMED, /* it is closed at the end of the round (DOOMED) */
    SB_CLIENT_END_GONE    /* it is closed: its affinity binding goes */
} sb_client_end;

typedef enum {
    SB_PHASE_SERVING = 0,
    SB_PHASE_LINGER,   /* stdio: stdin ended, waiting for in-flight responses (SB-I-5) */
    SB_PHASE_DRAINING, /* 10.2: workers told to stop, waiting for them */
    SB_PHASE_KILLING,  /* SB-10.2-4: drain_timeout_sec passed, SIGKILL sent, awaiting the exits */
    SB_PHASE_DONE
} sb_phase;

/* SB-X-22: under connection affinity the daemon is its workers'
 * descendants' reaper (supervise_strays.c). */
#define SB_REAPER_SPARED 16
typedef struct {
    bool on;        /* it is a child subreaper: orphans come to it */
    int left;       /* children that were not workers at the last look */
    pid_t *workers; /* worker_count + SB_REAPER_SPARED entries: who is no stray, at each look */
    /* Children it had at start, before any worker (a shell's job started
     * before the shell exec'd the daemon): no worker's, never killed. */
    pid_t spared[SB_REAPER_SPARED];
    int spared_count;
} sb_reaper;

typedef struct sb_bus {
    const sb_config *cfg;
    const sb_limits *limits;
    sb_mode mode;
    sb_loop loop;
    sb_router router;

    sb_worker *workers;
    int worker_count;
    int live_workers; /* processes not yet reaped */
    sb_reaper reaper; /* SB-X-22 */

    sb_client_table clients; /* handed out and returned by clients.c only */

    sb_round round;      /* the per-round lists (round.h) */
    bool reoffer_held;   /* an id was freed or the running workers changed: the held clients
                          offer their line again, at the end of the round (SB-I-45) */
    size_t client_bytes; /* SB-X-17: storage of every client's buffers, with a budget set */
    bool over_budget;    /* ... and it went over the budget this round */
    bool pending_full;   /* the pending table is full, and it was said */
    /* The one route by which a client's end reaches supervision, which sits
     * above client_state.c (set by daemon.c): called by sb_client_enter the
     * moment a client ends (its input ended with all of it forwarded, or it
     * is doomed; SB-X-19), before any other client is routed, so no one is
     * bound to its worker meanwhile; and by sb_clients_close when it is gone
     * (SB-X-16). */
    void (*client_end)(struct sb_bus *d, sb_client *c, sb_client_end how);

    int stdin_flags, stdout_flags; /* stdio mode: as found, given back at exit */

    sb_phase phase;   /* written by sb_phase_enter only */
    sb_timers timers; /* every deadline above and of each peer (SB_TIMER_*) */
} sb_bus;

/* Worker slots: the pools' instances, and spare ones for per_connection
 * workers still exiting (SB-X-21). */
int sb_bus_worker_slots(const sb_config *cfg);
/* Allocates d's tables for cfg and opt->mode (worker ids in config order,
 * SB-I-13). Returns 0, or STDIO_BUS_ERR (logged); call sb_bus_fini after
 * either. */
int sb_bus_init(sb_bus *d, const sb_config *cfg, const sb_options *opt);
/* Frees what sb_bus_init allocated; the peers' fds and buffers are the
 * daemon's to close first. */
void sb_bus_fini(sb_bus *d);

/* Handlers registered per peer find the daemon from the loop it embeds,
 * instead of through a back-pointer in every peer or a global. */
static inline sb_bus *sb_bus_of_loop(sb_loop *l) {
    return (sb_bus *)((char *)l - offsetof(sb_bus, loop));
}

/* The client whose connection p is (p->kind == SB_PEER_CLIENT): by its
 * slot, the index it is known by. */
static inline sb_client *sb_bus_client(sb_bus *d, const sb_peer *p) {
    return &d->clients.at[p->index];
}

/* How a failed worker's own output is treated from the failure on. */
typedef enum {
    SB_KEEP_OUTPUT = 0, /* its stdin broke: what it writes is still good */
    SB_MUTE_OUTPUT      /* its output broke (5.3): nothing more is routed */
} sb_fail_output;

#define SB_IDLE_SWEEP_MS 1000
/* SB-10.2-4: how long the daemon waits for the workers it SIGKILLed to be
 * reaped (through SIGCHLD, as any exit) before it exits anyway. A killed
 * process is gone at once unless it is stuck in the kernel (uninterruptible
 * sleep), which the daemon must not wait on without bound. */
#define SB_KILL_REAP_MS 1000

/* Timer ids in d->timers: the daemon's own, then SB_TIMERS_PER_PEER for
 * each worker, then as many for each client slot. A timer is armed where
 * its deadline is set; its owner checks, when it fires, that it still
 * applies (a stale one only costs a wake-up). */
enum {
    SB_TIMER_PHASE = 0, /* the phase's deadline: LINGER (SB-I-5), DRAINING (SB-10.2-4) */
    SB_TIMER_SWEEP,     /* the idle sweep, armed while clients hold buffers */
    SB_TIMER_ACCEPT,    /* the listener rests after accept() failed */
    SB_TIMER_PEERS
};
/* Per peer: FULL for both kinds, the others by kind. */
enum {
    SB_TIMER_FULL = 0, /* full_since_ms + backpressure_timeout_sec (SB-7.3.1-4) */
    SB_TIMER_RESTART,  /* worker: its restart (7.1.3) */
    SB_TIMER_KILL,     /* worker: STOPPING, SIGKILL then */
    SB_TIMER_LOST,     /* worker: its stdin broke or its stdout ended: failed if still alive
                          then (SB-I-39, SB-I-46) */
    SB_WORKER_TIMERS
};
enum {
    SB_TIMER_HELD = 1, /* client: HELD after its input ended, for drain_timeout_sec (SB-I-41) */
    SB_TIMER_ENDING,   /* client: ENDING for drain_timeout_sec (SB-I-41) */
    SB_TIMER_CLOSING,  /* client: CLOSING for drain_timeout_sec (SB-X-14) */
    SB_TIMER_BIND,     /* client: waiting for a worker of its own (SB-X-24) */
    SB_CLIENT_TIMERS
};
#define SB_TIMERS_PER_PEER                                                                         \
    ((int)SB_CLIENT_TIMERS > (int)SB_WORKER_TIMERS ? (int)SB_CLIENT_TIMERS : (int)SB_WORKER_TIMERS)

static inline int sb_bus_timer(const sb_bus *d, const sb_peer *p, int which) {
    int slot = p->kind == SB_PEER_WORKER ? p->index : d->worker_count + p->index;
    return SB_TIMER_PEERS + slot * SB_TIMERS_PER_PEER + which;
}

/* sb_bus_timer's inverse, for a peer's timer id (>= SB_TIMER_PEERS): which
 * of its timers it is; *worker is its worker slot, or -1 and *client its
 * client slot. */
static inline int sb_bus_timer_decode(const sb_bus *d, int id, int *worker, int *client) {
    int slot = (id - SB_TIMER_PEERS) / SB_TIMERS_PER_PEER;
    *worker = slot < d->worker_count ? slot : -1;
    *client = slot < d->worker_count ? -1 : slot - d->worker_count;
    return (id - SB_TIMER_PEERS) % SB_TIMERS_PER_PEER;
}

static inline void sb_bus_arm(sb_bus *d, const sb_peer *p, int which, int64_t at) {
    sb_timers_arm(&d->timers, sb_bus_timer(d, p, which), at);
}

static inline void sb_bus_disarm(sb_bus *d, const sb_peer *p, int which) {
    sb_timers_disarm(&d->timers, sb_bus_timer(d, p, which));
}

#endif
