/* A worker slot (spec 3.3, Appendix B): its process, its pipes and its
 * restart history. The slot id is stable across restarts (SB-I-13). */
#ifndef SB_WORKER_H
#define SB_WORKER_H

#include "config.h"
#include "peer.h"
#include "restart.h"
#include "router.h"

#include <stdint.h>
#include <sys/types.h>

/* Appendix B, with its STOPPING told apart by what the worker still does.
 * Only supervise.c changes a worker's state (sb_worker_init sets the
 * first, STOPPED), through sb_worker_enter. */
typedef enum {
    SB_WORKER_STARTING = 0,
    SB_WORKER_RUNNING,  /* takes messages while both its pipes are whole; its output is routed */
    SB_WORKER_RETIRING, /* SB-X-19: its client left: it takes no one new, its output is routed,
                           its stdin closes once written */
    SB_WORKER_STOPPING, /* failed keeping its output (SB-I-40), or told to stop (10.2) */
    SB_WORKER_MUTED,    /* failed (5.3): on its way out, its output no longer routed */
    SB_WORKER_STOPPED
} sb_worker_state;

/* SB-I-7: a worker's stderr line longer than this is logged in pieces of
 * this size, so that each piece with its prefix (time, level, the worker's
 * name of up to 63 bytes, "stderr: ") fits one log line (log.c's
 * SB_LOG_LINE_MAX): a longer piece would be cut there and its end lost. */
#define SB_WORKER_STDERR_LINE 2048
/* Log bytes per second that one worker's stderr may cost (issue 14): a
 * worker writing empty lines as fast as it can would otherwise make the
 * daemon write ~90 bytes of log per byte. Counted per relayed line as its
 * text plus SB_WORKER_RELAY_LINE_COST for the prefix. */
#define SB_WORKER_STDERR_BUDGET   (256 * 1024)
#define SB_WORKER_RELAY_LINE_COST 96

typedef struct {
    sb_peer peer; /* in_fd = its stdout, out_fd = its stdin */
    int id;
    const sb_pool_config *pool;
    sb_worker_state state;
    pid_t pid;   /* > 0 while a process exists (until reaped) */
    bool reaped; /* waitpid() collected it: the pid may be reused, never signal it */
    int stderr_fd;
    size_t stderr_len;
    char *stderr_buf;       /* SB_WORKER_STDERR_LINE bytes (SB-I-7) */
    int64_t relay_since_ms; /* start of the current second of relayed stderr */
    size_t relay_used;      /* log bytes it cost in that second */
    size_t relay_dropped;   /* stderr bytes dropped since last reported */
    long relay_dropped_lines;
    sb_restart_history restarts;
    bool lost_stdout;        /* ... and it was its stdout (SB-I-46), not its stdin (SB-I-39) */
    bool given_up;           /* max_restarts reached (SB-7.1.3-3) */
    bool recycling;          /* SB-X-20: retiring, or exited, and to be restarted fresh */
    bool term_sent;          /* SB-X-19: its stop grace is over, SIGTERM sent */
    bool room_kill;          /* SB-X-23: SIGKILLed for a waiting client, not yet reaped */
    bool close_when_written; /* SB-X-19: retiring, its stdin closes once its queue is written */
    /* SB-X-19, SB-X-23: when its client left (the oldest gives way first),
     * kept once it is muted or exits, until its exit is handled; 0: its
     * client has not left since it started */
    int64_t retired_ms;
    char env_id[48];
    char env_pool[320];
} sb_worker;

const char *sb_worker_state_name(sb_worker_state s);

/* The one place a worker's state changes (Appendix B; its table of
 * transitions is in worker.c); the router's view of it follows
 * (sb_worker_publish). Supervision (supervise.c) decides when. */
void sb_worker_enter(sb_worker *w, sb_worker_state to, sb_router *view);

/* The router's view of w, derived from its state and its pipes: it takes
 * messages while RUNNING with both pipes whole. Called on every transition
 * and when one of its pipes is lost. */
void sb_worker_publish(const sb_worker *w, sb_router *view);

/* Whether the lines w writes are read and routed: not once it failed for
 * its output (5.3), nor before it runs or after it exited. */
static inline bool sb_worker_routes_output(const sb_worker *w) {
    return w->state == SB_WORKER_RUNNING || w->state == SB_WORKER_RETIRING ||
           w->state == SB_WORKER_STOPPING;
}

/* Prepares a slot; allocates its stderr buffer and restart history.
 * Returns 0 or STDIO_BUS_ERR. */
int sb_worker_init(sb_worker *w, int id, const sb_pool_config *pool, const sb_limits *limits);
void sb_worker_fini(sb_worker *w);

/* Forks and execs the pool's command. Returns 0 once exec succeeded, or
 * STDIO_BUS_ERR when no process could be started (reason logged). The
 * state is its supervision's (supervise.c), which sets it around this. */
int sb_worker_start(sb_worker *w);

/* Sends sig to the process if it exists and was not reaped yet; for a
 * worker of a pool with connection affinity (SB-X-18), to its process
 * group: the worker and whatever it started. */
void sb_worker_signal(sb_worker *w, int sig);

/* SB-X-18: the worker has exited but is not reaped yet (its zombie keeps
 * the group id from being reused): SIGKILL to what is left in its process
 * group. Does nothing for other workers. */
void sb_worker_end_group(sb_worker *w);

/* Reads the worker's stderr and relays each complete line to the daemon's
 * stderr with the worker's context (SB-I-7), within SB_WORKER_STDERR_BUDGET
 * (lines over it are dropped and counted, and the count logged once the
 * second is over or at exit): one read, or with at_exit,
 * what the pipe holds now (never more: orphans of the worker may keep
 * writing), then the partial line too, as at EOF. Returns STDIO_BUS_EOF
 * when the pipe ended. */
int sb_worker_relay_stderr(sb_worker *w, bool at_exit);

/* What a drain at exit may read from one of the worker's pipes: the bytes
 * waiting in it now (FIONREAD), or SB_WORKER_EXIT_READ_MAX when that
 * cannot be told. */
#define SB_WORKER_EXIT_READ_MAX (1u << 20)
size_t sb_worker_pipe_pending(int fd);

/* Refreshes peer.name from id, pool and pid. */
void sb_worker_name(sb_worker *w);

#endif
