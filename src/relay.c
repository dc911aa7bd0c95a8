#include "daemon.h"
#include "bus_limits.h"
#include "fdlimit.h"
#include "log.h"
#include "loop.h"
#include "net.h"
#include "peer.h"
#include "router.h"
#include "signals.h"
#include "status.h"
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef enum {
    SB_PHASE_SERVING = 0,
    SB_PHASE_LINGER,   /* stdio: stdin ended, waiting for in-flight responses (SB-I-5) */
    SB_PHASE_DRAINING, /* 10.2: workers told to stop, waiting for them */
    SB_PHASE_DONE
} sb_phase;

typedef struct {
    const sb_config *cfg;
    const sb_limits *limits;
    sb_mode mode;
    sb_loop loop;
    sb_router router;

    sb_worker *workers;
    int worker_count;
    int live_workers; /* processes not yet reaped */

    sb_peer *clients; /* STDIO_BUS_MAX_CONNECTIONS slots */
    int *free_clients;
    int free_count;
    int client_count;

    sb_peer **ready; /* peers with buffered lines to process */
    int ready_count;
    sb_peer **doomed;
    int doomed_count;
    sb_peer **dirty; /* peers with queued bytes to write at the end of the round */
    int dirty_count;
    sb_peer **held; /* clients whose next line waits for its id to be free (SB-I-45) */
    int held_count;
    sb_peer **ending; /* socket clients whose input ended, still owed answers (SB-I-41) */
    int ending_count;
    int closing_count; /* clients closed once their output is written (SB-X-14) */
    int full_outputs;  /* peers whose output is over its cap */
    int orphans;       /* pending requests of clients that have left (SB-I-23, SB-I-47) */
    bool pending_full; /* the pending table is full, and it was said */

    int listen_fd;
    int spare_fd;             /* /dev/null, given up to accept-and-close when out of fds */
    int64_t accept_resume_ms; /* listener resting after accept() failed; 0 = not */
    int64_t rare_at_ms;       /* earliest of accept_resume_ms and ending_by_ms; 0 = none */
    bool accept_failing;      /* an episode of failed accept()s is going on */
    long accept_refused;      /* connections closed unserved in that episode */
    const char *unix_path;
    sb_net_unix_id unix_id; /* the socket file we bound (SB-I-22) */
    int signal_fd;
    int stderr_watch;          /* log lines dropped: 1 = waiting for stderr, -1 = it failed */
    unsigned stderr_failed_at; /* sb_log_clears when stderr_watch became -1 */
    int stdin_flags, stdout_flags;

    sb_phase phase;
    int64_t linger_deadline_ms;
    int64_t drain_deadline_ms;
    int64_t next_sweep_ms; /* 0 = no idle sweep scheduled */
} sb_daemon;

/* One daemon per process: handlers registered per peer reach it here
 * instead of through a back-pointer in every peer. */
static sb_daemon *daemon_ctx;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Deadlines that are rarely set share one check per loop turn. A stale,
 * earlier value only costs a wake-up. */
static void rare_at(sb_daemon *d, int64_t t) {
    if (!d->rare_at_ms || t < d->rare_at_ms)
        d->rare_at_ms = t;
}

/* ---- interest and lifecycle of peers --------------------------------- */

static bool may_read(const sb_daemon *d, const sb_peer *p) {
    if (p->in_fd < 0 || p->in_eof || p->doomed || p->blocked_on || p->held_since_ms ||
        p->closing_since_ms)
        return false;
    if (p->kind == SB_PEER_CLIENT)
        return d->phase == SB_PHASE_SERVING; /* SB-I-21: stop reading clients at shutdown */
    const sb_worker *w = (const sb_worker *)p;
    return !w->muted && (w->state == SB_WORKER_RUNNING || w->state == SB_WORKER_STOPPING);
}

static void on_client_event(void *data, int fd, short revents);
static void on_worker_event(void *data, int fd, short revents);
/* Connection affinity (SB-X-10..SB-X-16), at the end of the file. */
static bool affinity_attach(sb_daemon *d, sb_peer *c);
static void affinity_detach(sb_daemon *d, sb_peer *c);
static bool affinity_worker_exited(sb_daemon *d, sb_worker *w);
static void affinity_close_if_flushed(sb_daemon *d, sb_peer *c);
static void affinity_check_closing(sb_daemon *d, int64_t now);
static int64_t affinity_next_deadline(const sb_daemon *d, int64_t next);

static void update_interest(sb_daemon *d, sb_peer *p) {
    short in_events = may_read(d, p) ? POLLIN : 0;
    short out_events = sb_outq_len(&p->out) && !p->doomed ? POLLOUT : 0;
    if (p->in_parked && in_events) { /* resumed: watch the hung-up input again */
        p->in_parked = false;
        if (sb_loop_add(&d->loop, p->in_fd,
                        p->in_fd == p->out_fd ? in_events | out_events : in_events,
                        p->kind == SB_PEER_CLIENT ? on_client_event : on_worker_event, p) < 0)
            p->in_parked = true;
        return;
    }
    if (p->in_fd >= 0 && p->in_fd == p->out_fd) {
        sb_loop_set(&d->loop, p->in_fd, in_events | out_events);
        return;
    }
    if (p->in_fd >= 0 && !p->in_parked)
        sb_loop_set(&d->loop, p->in_fd, in_events);
    if (p->out_fd >= 0)
        sb_loop_set(&d->loop, p->out_fd, out_events);
}

/* A paused input that hangs up would wake poll() forever (POLLHUP cannot
 * be masked): take it off the loop until it is resumed; what it still
 * holds is read then. Returns true when the input is paused (the event is
 * absorbed: nothing may be read now). */
static bool park_if_paused(sb_daemon *d, sb_peer *p, int fd, short revents) {
    if (!p->blocked_on || fd != p->in_fd)
        return false;
    if (revents & (POLLHUP | POLLERR)) {
        sb_loop_del(&d->loop, fd);
        p->in_parked = true;
    }
    return true;
}

static void mark_ready(sb_daemon *d, sb_peer *p) {
    if (!p->queued && !p->doomed) {
        p->queued = true;
        d->ready[d->ready_count++] = p;
    }
}

/* SB-I-45: the client's next line has an id whose value is pending on
 * every worker it could go to. It stays in the input buffer, and the client
 * is not read (the socket buffer and max_input_buffer bound what waits),
 * until a pending request ends or the set of running workers changes. */
static void hold_client(sb_daemon *d, sb_peer *c) {
    c->held_since_ms = now_ms();
    d->held[d->held_count++] = c;
    update_interest(d, c);
}

static void unhold_client(sb_daemon *d, sb_peer *c) {
    for (int i = 0; i < d->held_count; i++)
        if (d->held[i] == c) {
            d->held[i] = d->held[--d->held_count];
            break;
        }
    c->held_since_ms = 0;
}

/* Every held client offers its line again at the end of the round; those
 * whose id is still in use are held again. */
static void release_held(sb_daemon *d) {
    for (int i = 0; i < d->held_count; i++) {
        sb_peer *c = d->held[i];
        c->held_since_ms = 0;
        update_interest(d, c);
        mark_ready(d, c);
    }
    d->held_count = 0;
}

/* Closing is deferred to the end of the dispatch round, so no handler ever
 * runs on a peer that was freed under it (redis's freeClientAsync). */
static void doom(sb_daemon *d, sb_peer *p) {
    if (p->doomed)
        return;
    p->doomed = true;
    d->doomed[d->doomed_count++] = p;
    update_interest(d, p);
}

/* Every input paused on `out` resumes (SB-7.3.1-3). */
static void release_waiters(sb_daemon *d, sb_peer *out) {
    for (int i = 0; i < d->worker_count; i++) {
        sb_peer *p = &d->workers[i].peer;
        if (p->blocked_on == out) {
            p->blocked_on = NULL;
            update_interest(d, p);
            mark_ready(d, p);
        }
    }
    for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS; i++) {
        sb_peer *p = &d->clients[i];
        if (p->kind == SB_PEER_CLIENT && p->blocked_on == out) {
            p->blocked_on = NULL;
            update_interest(d, p);
            mark_ready(d, p);
        }
    }
}

static void set_full(sb_daemon *d, sb_peer *p, bool full) {
    if (full && !p->full_since_ms) {
        p->full_since_ms = now_ms(); /* SB-7.3.1-2 */
        d->full_outputs++;
        sb_warn(p->name,
                "output queue over max_output_queue (%zu bytes queued): pausing its inputs",
                sb_outq_len(&p->out));
    } else if (!full && p->full_since_ms) {
        p->full_since_ms = 0;
        d->full_outputs--;
        sb_info(p->name, "output queue drained below max_output_queue: resuming its inputs");
        release_waiters(d, p);
    }
}

/* How a failed worker's own output is treated from the failure on. */
typedef enum {
    SB_KEEP_OUTPUT = 0, /* its stdin broke: what it writes is still good */
    SB_MUTE_OUTPUT      /* its output broke (5.3): nothing more is routed */
} sb_fail_output;

static void worker_fail(sb_daemon *d, sb_worker *w, sb_fail_output output, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void worker_stdin_lost(sb_daemon *d, sb_worker *w);

static void output_failed(sb_daemon *d, sb_peer *p, int rc) {
    if (p->kind == SB_PEER_WORKER) {
        worker_stdin_lost(d, (sb_worker *)p);
    } else {
        sb_info(p->name, "client went away (%s)",
                rc == STDIO_BUS_EOF ? "connection closed" : strerror(errno));
        doom(d, p);
    }
}

/* Lines at least this long are written at once, straight from the input
 * buffer; shorter ones are queued and written together at the end of the
 * round, one write(2) per destination instead of one per message. */
#define SB_DIRECT_WRITE_MIN 16384

#define SB_IDLE_SWEEP_MS 1000

/* A worker's stdout at EOF: how long its exit may take to be seen before
 * it counts as a worker that closed its stdout (SB-I-46). */
#define SB_STDOUT_LOST_GRACE_MS 1000

/* Queues one line for p. `from` is the input it came from, paused when p's
 * queue goes over its cap (SB-7.3.1-1, SB-I-17). Lines are never split
 * or interleaved (SB-I-26): each is appended whole behind the last. */
static void send_line(sb_daemon *d, sb_peer *p, const char *line, size_t len, sb_peer *from) {
    if (p->doomed || p->out_fd < 0)
        return;
    if (len >= SB_DIRECT_WRITE_MIN && sb_outq_len(&p->out) == 0) {
        int rc = sb_outq_send(&p->out, p->out_fd, line, len);
        if (rc == STDIO_BUS_EOF || rc == STDIO_BUS_ERR) {
            output_failed(d, p, rc);
            return;
        }
        if (rc == STDIO_BUS_EAGAIN)
            update_interest(d, p);
    } else {
        if (sb_outq_push(&p->out, line, len) < 0) {
            output_failed(d, p, STDIO_BUS_ERR);
            return;
        }
        if (!p->dirty) {
            p->dirty = true;
            d->dirty[d->dirty_count++] = p;
        }
    }
    if (sb_outq_over(&p->out)) {
        set_full(d, p, true);
        if (from && !from->blocked_on && from != p) {
            from->blocked_on = p;
            update_interest(d, from);
        }
    }
}

/* Writes what each output gathered this round. */
static void flush_dirty(sb_daemon *d) {
    for (int i = 0; i < d->dirty_count; i++) {
        sb_peer *p = d->dirty[i];
        p->dirty = false;
        if (p->kind == SB_PEER_FREE || p->doomed || p->out_fd < 0)
            continue;
        int rc = sb_outq_flush(&p->out, p->out_fd);
        if (rc == STDIO_BUS_EOF || rc == STDIO_BUS_ERR) {
            output_failed(d, p, rc);
            continue;
        }
        if (!sb_outq_over(&p->out))
            set_full(d, p, false);
        update_interest(d, p);
        affinity_close_if_flushed(d, p);
    }
    d->dirty_count = 0;
}

/* SB-I-8: under orphan_policy "error", a request that can no longer be
 * answered gets a JSON-RPC error instead of silence. */
static void send_error_reply(sb_daemon *d, sb_peer *client, const char *id, size_t id_len,
                             const char *sid, size_t sid_len, const char *why) {
    if (d->cfg->orphan_policy != SB_ORPHAN_ERROR || !client || client->kind != SB_PEER_CLIENT)
        return;
    char reply[STDIO_BUS_MAX_REQUEST_ID_LEN + STDIO_BUS_MAX_SESSION_ID_LEN + 256];
    int n = snprintf(reply, sizeof reply,
                     "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"error\":{\"code\":-32000,\"message\":"
                     "\"stdio_bus: %s\"}%s%.*s}\n",
                     (int)id_len, id, why, sid_len ? ",\"sessionId\":" : "", (int)sid_len, sid);
    if (n > 0 && (size_t)n < sizeof reply)
        send_line(d, client, reply, (size_t)n, NULL);
}

/* ---- routing ------------------------------------------------------------ */

static void format_tokens(const sb_fields *f, char *out, size_t size) {
    int n = 0;
    out[0] = '\0';
    if (f->id.type)
        n += snprintf(out, size, " id=%.*s", (int)(f->id.raw_len > 64 ? 64 : f->id.raw_len),
                      f->id.raw);
    if (f->session_id.type && (size_t)n < size)
        snprintf(out + n, size - (size_t)n, " sessionId=%.*s",
                 (int)(f->session_id.raw_len > 80 ? 80 : f->session_id.raw_len), f->session_id.raw);
}

/* Returns false when the line must wait (SB_ROUTE_HOLD): it was not
 * consumed, and nothing was recorded for it. */
static bool route_from_client(sb_daemon *d, sb_peer *c, const char *line, size_t len) {
    sb_route r = sb_router_from_client(&d->router, c->index, line, len);
    char tokens[200];
    switch (r.action) {
    case SB_ROUTE_IGNORE:
        return true;
    case SB_ROUTE_HOLD:
        if (sb_log_enabled(SB_LOG_DEBUG)) {
            format_tokens(&r.fields, tokens, sizeof tokens);
            sb_debug(c->name, "holding:%s: %s", tokens, sb_router_why(r.why));
        }
        return false;
    case SB_ROUTE_REJECT: /* SB-4.3-1, SB-4.3-2 */
        sb_warn(c->name, "malformed input (%s): closing the client", sb_router_why(r.why));
        doom(d, c);
        return true;
    case SB_ROUTE_DROP:
        format_tokens(&r.fields, tokens, sizeof tokens);
        if (r.why == SB_WHY_FOREIGN_SESSION)
            sb_warn(c->name, "discarding message:%s: %s (client slot %d)", tokens,
                    sb_router_why(r.why), r.other);
        else
            sb_warn(c->name, "discarding message:%s: %s", tokens, sb_router_why(r.why));
        if (r.is_request)
            send_error_reply(d, c, r.fields.id.raw, r.fields.id.raw_len, r.fields.session_id.raw,
                             r.fields.session_id.raw_len, sb_router_why(r.why));
        return true;
    case SB_ROUTE_TO_WORKER: {
        sb_worker *w = &d->workers[r.target];
        if (sb_log_enabled(SB_LOG_DEBUG)) {
            format_tokens(&r.fields, tokens, sizeof tokens);
            sb_debug(c->name, "-> %s:%s%s", w->peer.name, tokens,
                     r.new_session ? " (new session)" : "");
        }
        if (r.new_binding) /* SB-X-11 */
            sb_info(c->name, "bound to %s (affinity)", w->peer.name);
        send_line(d, &w->peer, line, len, c); /* SB-5.1.1-3: the bytes as received */
        return true;
    }
    case SB_ROUTE_TO_CLIENT:
        break; /* not produced for client input */
    }
    return true;
}

static void route_from_worker(sb_daemon *d, sb_worker *w, const char *line, size_t len) {
    sb_route r = sb_router_from_worker(&d->router, w->id, line, len);
    char tokens[200];
    switch (r.action) {
    case SB_ROUTE_IGNORE:
        return;
    case SB_ROUTE_REJECT: /* SB-5.3 */
        worker_fail(d, w, SB_MUTE_OUTPUT, "malformed output (%s)", sb_router_why(r.why));
        return;
    case SB_ROUTE_DROP: /* SB-6.3.1-4, SB-6.3.2-3, SB-6.3.3 */
        if (r.why == SB_WHY_CLIENT_GONE)
            d->orphans--; /* its entry is gone with the answer */
        format_tokens(&r.fields, tokens, sizeof tokens);
        sb_warn(w->peer.name, "discarding message:%s: %s", tokens, sb_router_why(r.why));
        if (r.why == SB_WHY_CLIENT_GONE && d->held_count)
            release_held(d); /* an orphan's id is free again */
        return;
    case SB_ROUTE_TO_CLIENT: {
        sb_peer *c = &d->clients[r.target];
        if (sb_log_enabled(SB_LOG_DEBUG)) {
            format_tokens(&r.fields, tokens, sizeof tokens);
            sb_debug(w->peer.name, "-> %s:%s", c->name, tokens);
        }
        send_line(d, c, line, len, &w->peer); /* SB-4.2.3-3: pass-through */
        if (d->held_count && (r.fields.result.type || r.fields.error.type))
            release_held(d); /* a pending id is free again */
        return;
    }
    case SB_ROUTE_TO_WORKER:
    case SB_ROUTE_HOLD:
        return;
    }
}

/* Routes every complete buffered line of p until it is paused or closed.
 * Returns STDIO_BUS_EFULL when a line overflows max_input_buffer. */
static int process_lines(sb_daemon *d, sb_peer *p) {
    const char *line;
    long n;
    if (p->held_since_ms || p->closing_since_ms)
        return STDIO_BUS_OK; /* SB-I-45: its next line waits; SB-X-14: nothing more is routed */
    while (!p->blocked_on && !p->doomed) {
        if (p->kind == SB_PEER_WORKER && ((sb_worker *)p)->muted)
            return STDIO_BUS_OK; /* a failed worker's further output is not routed */
        if (p->kind == SB_PEER_CLIENT && d->phase != SB_PHASE_SERVING &&
            d->phase != SB_PHASE_LINGER)
            return STDIO_BUS_OK;
        n = sb_frame_next(&p->in, &line);
        if (n == STDIO_BUS_EAGAIN)
            return STDIO_BUS_OK;
        if (n == STDIO_BUS_EFULL)
            return STDIO_BUS_EFULL;
        if (p->kind == SB_PEER_CLIENT) {
            if (!route_from_client(d, p, line, (size_t)n)) {
                sb_frame_unread(&p->in, (size_t)n);
                hold_client(d, p);
                return STDIO_BUS_OK;
            }
        } else
            route_from_worker(d, (sb_worker *)p, line, (size_t)n);
    }
    return STDIO_BUS_OK;
}

static void input_overflow(sb_daemon *d, sb_peer *p) {
    /* SB-7.3.2-1, SB-7.3.2-2 */
    if (p->kind == SB_PEER_WORKER) {
        worker_fail(d, (sb_worker *)p, SB_MUTE_OUTPUT,
                    "line longer than max_input_buffer (%zu bytes)", d->limits->max_input_buffer);
    } else {
        sb_error(p->name, "line longer than max_input_buffer (%zu bytes): closing the client",
                 d->limits->max_input_buffer);
        doom(d, p);
    }
}

static void on_input_eof(sb_daemon *d, sb_peer *p);

/* One read from p's input, then route what it completed. Returns
 * STDIO_BUS_OK when bytes were read, STDIO_BUS_EAGAIN when none were
 * waiting, STDIO_BUS_EOF when the input ended or failed (handled). */
static int read_input(sb_daemon *d, sb_peer *p) {
    if (p->blocked_on)
        return STDIO_BUS_EAGAIN; /* paused: its buffered lines go first */
    size_t avail;
    errno = 0;
    char *space = sb_frame_space(&p->in, &avail);
    if (!space) {
        if (errno == ENOMEM) {
            sb_error(p->name, "out of memory for its input buffer");
            if (p->kind == SB_PEER_CLIENT)
                doom(d, p);
            else
                worker_fail(d, (sb_worker *)p, SB_MUTE_OUTPUT, "out of memory");
        } else {
            input_overflow(d, p);
        }
        return STDIO_BUS_EOF;
    }
    ssize_t got;
    do
        got = read(p->in_fd, space, avail);
    while (got < 0 && errno == EINTR);
    if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return STDIO_BUS_EAGAIN;
        if (p->kind == SB_PEER_CLIENT) {
            sb_info(p->name, "read failed (%s): client gone", strerror(errno));
            doom(d, p);
        } else {
            on_input_eof(d, p);
        }
        return STDIO_BUS_EOF;
    }
    if (got == 0) {
        on_input_eof(d, p);
        return STDIO_BUS_EOF;
    }
    sb_frame_commit(&p->in, (size_t)got);
    if (p->kind == SB_PEER_CLIENT) {
        p->active = true;
        if (!d->next_sweep_ms)
            d->next_sweep_ms = now_ms() + SB_IDLE_SWEEP_MS;
    }
    if (process_lines(d, p) == STDIO_BUS_EFULL) {
        input_overflow(d, p);
        return STDIO_BUS_EOF;
    }
    return STDIO_BUS_OK;
}

/* ---- clients -------------------------------------------------------- */

static void on_client_event(void *data, int fd, short revents);

static sb_peer *client_open(sb_daemon *d, int in_fd, int out_fd) {
    if (d->free_count == 0)
        return NULL;
    int slot = d->free_clients[--d->free_count];
    sb_peer *c = &d->clients[slot];
    memset(c, 0, sizeof *c);
    c->kind = SB_PEER_CLIENT;
    c->index = slot;
    c->in_fd = in_fd;
    c->out_fd = out_fd;
    sb_frame_init(&c->in, d->limits->max_input_buffer);
    sb_outq_init(&c->out, d->limits->max_output_queue);
    if (in_fd == out_fd)
        snprintf(c->name, sizeof c->name, "client fd=%d", in_fd);
    else
        snprintf(c->name, sizeof c->name, "client stdio");
    if (sb_loop_add(&d->loop, in_fd, POLLIN, on_client_event, c) < 0 ||
        (out_fd != in_fd && sb_loop_add(&d->loop, out_fd, 0, on_client_event, c) < 0)) {
        sb_loop_del(&d->loop, in_fd);
        c->kind = SB_PEER_FREE;
        d->free_clients[d->free_count++] = slot;
        return NULL;
    }
    d->client_count++;
    return c;
}

static void log_client_request_dropped(void *ctx, const sb_request *r) {
    sb_peer *c = ctx;
    sb_debug(c->name, "pending request id=%.*s to worker %d discarded", (int)r->id_len, r->id,
             r->receiver);
}

static void client_close(sb_daemon *d, sb_peer *c) {
    if (sb_frame_pending(&c->in) && c->in_fd >= 0) /* SB-I-25 */
        sb_warn(c->name, "%zu byte(s) after the last newline discarded", sb_frame_pending(&c->in));
    /* SB-7.2-1..3 */
    int sessions = sb_sessions_drop_client(&d->router.sessions, c->index, NULL, NULL);
    /* Kept as orphans until answered, so a late answer reaches no one,
     * not a newcomer reusing the id (SB-I-23). */
    int pending =
        sb_pending_orphan_sender(&d->router.requests, c->index, log_client_request_dropped, c);
    d->orphans += pending;
    sb_pending_drop_receiver(&d->router.upstream, c->index, NULL, NULL);
    affinity_detach(d, c);
    sb_info(c->name, "disconnected: %d session(s) invalidated, %d pending request(s) discarded",
            sessions, pending);
    if (c->full_since_ms) {
        c->full_since_ms = 0;
        d->full_outputs--;
    }
    if (c->ending_by_ms) {
        for (int i = 0; i < d->ending_count; i++)
            if (d->ending[i] == c) {
                d->ending[i] = d->ending[--d->ending_count];
                break;
            }
        c->ending_by_ms = 0;
    }
    release_waiters(d, c);
    if (c->held_since_ms)
        unhold_client(d, c);
    if (c->closing_since_ms)
        d->closing_count--;
    if (c->in_fd >= 0) {
        sb_loop_del(&d->loop, c->in_fd);
        if (c->in_fd > STDERR_FILENO)
            close(c->in_fd);
    }
    if (c->out_fd >= 0 && c->out_fd != c->in_fd) {
        sb_loop_del(&d->loop, c->out_fd);
        if (c->out_fd > STDERR_FILENO)
            close(c->out_fd);
    }
    sb_frame_fini(&c->in);
    sb_outq_fini(&c->out);
    c->kind = SB_PEER_FREE;
    c->in_fd = c->out_fd = -1;
    d->free_clients[d->free_count++] = c->index;
    d->client_count--;
    if (d->mode == SB_MODE_STDIO && d->phase < SB_PHASE_DRAINING) {
        sb_info(NULL, "the stdio client is gone: shutting down");
        d->phase = SB_PHASE_LINGER;
        d->linger_deadline_ms = now_ms(); /* nothing left to deliver to */
    }
}

/* Requests of c in flight: pending on a worker, or its next line held
 * back until its id is free (SB-I-45). */
static bool client_has_pending(const sb_daemon *d, const sb_peer *c) {
    return d->router.requests.send_head[c->index] >= 0 || c->held_since_ms;
}

static bool client_settled(const sb_daemon *d, const sb_peer *c) {
    return !client_has_pending(d, c) && sb_outq_len(&c->out) == 0;
}

/* SB-I-41: a socket client's input ended: a half-close (`nc -N`), or a
 * close that looks the same until a write fails. It sends nothing more
 * but may still read: it gets the answers to its requests, then the
 * connection is closed as in 7.2, at the latest after drain_timeout_sec. */
static void client_input_ended(sb_daemon *d, sb_peer *c) {
    if (c->ending_by_ms)
        return;
    update_interest(d, c); /* stop reading: EOF would wake poll() for ever */
    if (client_settled(d, c)) {
        sb_info(c->name, "connection closed by the client");
        doom(d, c);
        return;
    }
    sb_info(c->name, "end of input from the client: closing once its answers are delivered");
    c->ending_by_ms = now_ms() + (int64_t)d->limits->drain_timeout_sec * 1000;
    d->ending[d->ending_count++] = c;
    rare_at(d, c->ending_by_ms);
}

/* Closes the clients of client_input_ended that are owed nothing more. */
static void close_ended_clients(sb_daemon *d, int64_t now) {
    for (int i = 0; i < d->ending_count; i++) {
        sb_peer *c = d->ending[i];
        if (c->doomed)
            continue;
        if (client_settled(d, c)) {
            sb_info(c->name, "answers delivered: closing the connection");
            doom(d, c);
        } else if (now >= c->ending_by_ms) {
            sb_warn(c->name,
                    "answers still owed after drain_timeout_sec=%d: closing the connection",
                    d->limits->drain_timeout_sec);
            doom(d, c);
        }
    }
}

static void on_input_eof(sb_daemon *d, sb_peer *p) {
    p->in_eof = true;
    if (p->kind == SB_PEER_WORKER) {
        /* Almost always the worker is exiting and its exit (SIGCHLD) does
         * the cleanup. Until then it answers nothing more: no new session
         * or sessionless message goes to it, and if it is still running a
         * moment later it has closed its stdout (SB-I-46). */
        sb_worker *w = (sb_worker *)p;
        sb_loop_del(&d->loop, p->in_fd);
        close(p->in_fd);
        p->in_fd = -1;
        sb_router_set_running(&d->router, w->id, false);
        if (w->state == SB_WORKER_RUNNING && d->phase < SB_PHASE_DRAINING && !w->lost_ms) {
            w->lost_ms = now_ms() + SB_STDOUT_LOST_GRACE_MS;
            w->lost_stdout = true;
        }
        return;
    }
    if (d->mode != SB_MODE_STDIO) {
        client_input_ended(d, p);
        return;
    }
    /* SB-I-5: stdin EOF. Deliver what is in flight, then shut down. */
    sb_loop_del(&d->loop, p->in_fd);
    p->in_fd = -1;
    if (sb_frame_pending(&p->in))
        sb_warn(p->name, "stdin ended inside a line: %zu byte(s) without a newline discarded",
                sb_frame_pending(&p->in));
    if (d->phase == SB_PHASE_SERVING) {
        d->phase = SB_PHASE_LINGER;
        d->linger_deadline_ms = now_ms() + (int64_t)d->limits->drain_timeout_sec * 1000;
        sb_info(p->name, "stdin reached EOF: delivering in-flight responses, then shutting down");
    }
}

static void on_client_event(void *data, int fd, short revents) {
    sb_peer *c = data;
    sb_daemon *d = daemon_ctx;
    if (c->doomed)
        return;
    if ((revents & POLLOUT) && fd == c->out_fd) {
        int rc = sb_outq_flush(&c->out, c->out_fd);
        if (rc == STDIO_BUS_EOF || rc == STDIO_BUS_ERR) {
            sb_info(c->name, "client went away while writing");
            doom(d, c);
            return;
        }
        if (!sb_outq_over(&c->out))
            set_full(d, c, false);
        update_interest(d, c);
        affinity_close_if_flushed(d, c);
    }
    if (c->in_eof && fd == c->in_fd && (revents & (POLLHUP | POLLERR))) {
        /* SB-I-41: after a half-close, the peer is now gone both ways */
        sb_info(c->name, "connection closed by the client");
        doom(d, c);
        return;
    }
    if (c->blocked_on && fd == c->in_fd && c->in_fd == c->out_fd &&
        (revents & (POLLHUP | POLLERR)) && !sb_net_has_data(fd)) {
        /* Hung up while paused, nothing left unread: gone (7.2). Lines taken
         * before the pause go with it, like a partial line (SB-I-25). */
        sb_info(c->name, "connection closed by the client while its input was paused");
        doom(d, c);
        return;
    }
    if (park_if_paused(d, c, fd, revents))
        return;
    if (fd == c->in_fd && (revents & (POLLIN | POLLHUP | POLLERR)))
        read_input(d, c);
    else if (fd == c->out_fd && fd != c->in_fd && (revents & (POLLERR | POLLHUP))) {
        sb_info(c->name, "stdout closed by the reader");
        doom(d, c);
    }
}

/* accept() failed and the connection stays queued, so the listening
 * socket stays readable: polling it again at once would spin. Out of
 * descriptors, the spare one makes room to accept and close what is queued
 * (the client sees its connection closed, as beyond MAX_CONNECTIONS,
 * SB-I-18); then the listener rests a moment, for descriptors to free up.
 * One warning per episode; the count comes when accept() works again. */
#define SB_ACCEPT_BACKOFF_MS 100
#define SB_ACCEPT_SHED_MAX   64

static void accept_failed(sb_daemon *d, int fd, int err) {
    bool no_fds = err == EMFILE || err == ENFILE;
    if (!d->accept_failing) {
        d->accept_failing = true;
        d->accept_refused = 0;
        if (no_fds)
            sb_warn(NULL,
                    "accept failed: %s: out of file descriptors, new connections are "
                    "closed at once until some free up",
                    strerror(err));
        else
            sb_warn(NULL, "accept failed: %s: new connections wait", strerror(err));
    }
    if (no_fds && d->spare_fd >= 0) {
        close(d->spare_fd);
        for (int i = 0; i < SB_ACCEPT_SHED_MAX; i++) {
            int cfd = sb_net_accept(fd);
            if (cfd < 0)
                break;
            close(cfd);
            d->accept_refused++;
        }
        d->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    sb_loop_set(&d->loop, fd, 0);
    d->accept_resume_ms = now_ms() + SB_ACCEPT_BACKOFF_MS;
    rare_at(d, d->accept_resume_ms);
}

static void accept_recovered(sb_daemon *d) {
    d->accept_failing = false;
    sb_info(NULL, "accepting connections again; %ld connection(s) closed unserved meanwhile",
            d->accept_refused);
}

static void on_listen_event(void *data, int fd, short revents) {
    sb_daemon *d = data;
    (void)revents;
    for (;;) {
        int cfd = sb_net_accept(fd);
        if (cfd == STDIO_BUS_EAGAIN)
            return;
        if (cfd < 0) {
            accept_failed(d, fd, errno);
            return;
        }
        if (d->accept_failing)
            accept_recovered(d);
        if (d->client_count >= STDIO_BUS_MAX_CONNECTIONS) { /* SB-I-18 */
            sb_warn(NULL, "connection fd=%d refused: MAX_CONNECTIONS (%d) clients connected", cfd,
                    STDIO_BUS_MAX_CONNECTIONS);
            close(cfd);
            continue;
        }
        sb_peer *c = client_open(d, cfd, cfd);
        if (!c) {
            sb_warn(NULL, "connection fd=%d refused: out of memory", cfd);
            close(cfd);
            continue;
        }
        sb_info(c->name, "connected");
        if (!affinity_attach(d, c))
            client_close(d, c); /* SB-X-15 */
    }
}

/* ---- workers -------------------------------------------------------- */

static void on_worker_event(void *data, int fd, short revents);
static void on_worker_stderr(void *data, int fd, short revents);
static void reap_children(sb_daemon *d);

static void worker_close_fds(sb_daemon *d, sb_worker *w) {
    sb_peer *p = &w->peer;
    if (p->out_fd >= 0) {
        sb_loop_del(&d->loop, p->out_fd);
        close(p->out_fd);
        p->out_fd = -1;
    }
    if (p->in_fd >= 0) {
        sb_loop_del(&d->loop, p->in_fd);
        close(p->in_fd);
        p->in_fd = -1;
    }
    if (w->stderr_fd >= 0) {
        sb_worker_relay_stderr(w, true);
        sb_loop_del(&d->loop, w->stderr_fd);
        close(w->stderr_fd);
        w->stderr_fd = -1;
    }
    sb_outq_clear(&p->out);
    sb_frame_fini(&p->in);
    sb_frame_init(&p->in, d->limits->max_input_buffer);
    if (p->full_since_ms) {
        p->full_since_ms = 0;
        d->full_outputs--;
    }
    p->blocked_on = NULL;
    release_waiters(d, p);
}

static int worker_spawn(sb_daemon *d, sb_worker *w) {
    w->restart_at_ms = 0;
    if (sb_worker_start(w) < 0)
        return STDIO_BUS_ERR;
    d->live_workers++;
    if (sb_loop_add(&d->loop, w->peer.in_fd, POLLIN, on_worker_event, w) < 0 ||
        sb_loop_add(&d->loop, w->peer.out_fd, 0, on_worker_event, w) < 0 ||
        sb_loop_add(&d->loop, w->stderr_fd, POLLIN, on_worker_stderr, w) < 0) {
        sb_error(w->peer.name, "out of memory registering its pipes");
        worker_fail(d, w, SB_MUTE_OUTPUT, "cannot be watched");
        return STDIO_BUS_ERR;
    }
    sb_router_set_running(&d->router, w->id, true);
    if (d->held_count)
        release_held(d); /* SB-I-45: one more worker to go to */
    return STDIO_BUS_OK;
}

static void log_session_invalidated(void *ctx, const sb_session *s) {
    sb_worker *w = ctx;
    sb_debug(w->peer.name, "session %.*s invalidated", (int)s->key_len, s->key);
}

static void invalidate_sessions(sb_daemon *d, sb_worker *w) {
    int n = sb_sessions_drop_worker(&d->router.sessions, w->id, log_session_invalidated, w);
    if (n)
        sb_warn(w->peer.name, "%d session(s) invalidated", n);
}

/* SB-5.3: log, invalidate its sessions, SIGTERM, restart per policy (once
 * the exit is reaped). With SB_MUTE_OUTPUT its later output is not routed;
 * a worker whose stdin broke keeps its output, so responses it wrote
 * before exiting still arrive (SB-I-40). */
static void worker_fail(sb_daemon *d, sb_worker *w, sb_fail_output output, const char *fmt, ...) {
    if (w->pid <= 0 || w->muted)
        return;
    if (w->state == SB_WORKER_STOPPING) { /* already failed once; maybe now mute it */
        if (output == SB_MUTE_OUTPUT) {
            w->muted = true;
            update_interest(d, &w->peer);
        }
        return;
    }
    char reason[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    sb_error(w->peer.name, "%s: %s", reason,
             w->reaped ? "the worker has exited already" : "terminating the worker");
    w->muted = output == SB_MUTE_OUTPUT;
    sb_router_set_running(&d->router, w->id, false);
    invalidate_sessions(d, w);
    if (d->held_count)
        release_held(d); /* SB-I-45: fewer workers to wait for */
    w->state = SB_WORKER_STOPPING;
    w->kill_at_ms = now_ms() + (int64_t)d->limits->drain_timeout_sec * 1000;
    sb_worker_signal(w, SIGTERM);
    if (w->peer.out_fd >= 0) { /* its stdin: nothing more goes to it */
        sb_loop_del(&d->loop, w->peer.out_fd);
        close(w->peer.out_fd);
        w->peer.out_fd = -1;
        sb_outq_clear(&w->peer.out);
        if (w->peer.full_since_ms) {
            w->peer.full_since_ms = 0;
            d->full_outputs--;
        }
        release_waiters(d, &w->peer);
    }
    update_interest(d, &w->peer);
}

/* The worker's stdin broke (EPIPE, or POLLHUP/POLLERR on the pipe). Almost
 * always the worker is exiting and SIGCHLD is on its way: stop sending to
 * it, keep routing what it wrote, and only if it is still alive a moment
 * later treat it as a worker that closed its stdin (SB-I-39). */
#define SB_STDIN_LOST_GRACE_MS 1000

static void worker_stdin_lost(sb_daemon *d, sb_worker *w) {
    sb_peer *p = &w->peer;
    if (p->out_fd < 0)
        return;
    sb_loop_del(&d->loop, p->out_fd);
    close(p->out_fd);
    p->out_fd = -1;
    sb_outq_clear(&p->out);
    if (p->full_since_ms) {
        p->full_since_ms = 0;
        d->full_outputs--;
    }
    release_waiters(d, p);
    sb_router_set_running(&d->router, w->id, false);
    if (w->state == SB_WORKER_RUNNING && d->phase < SB_PHASE_DRAINING)
        if (!w->lost_ms) {
            w->lost_ms = now_ms() + SB_STDIN_LOST_GRACE_MS;
            w->lost_stdout = false;
        }
    sb_debug(p->name, "its stdin pipe closed");
}

typedef struct {
    sb_daemon *d;
    sb_worker *w;
} orphan_ctx;

static void discard_orphan(void *ctx, const sb_request *r) {
    orphan_ctx *oc = ctx;
    if (r->sender < 0) {
        oc->d->orphans--; /* its client left already */
        return;
    }
    sb_peer *c = &oc->d->clients[r->sender];
    /* SB-7.1.2-4 */
    sb_warn(oc->w->peer.name, "pending request id=%.*s from %s discarded: worker exited",
            (int)r->id_len, r->id, c->name);
    send_error_reply(oc->d, c, r->id, r->id_len, r->session, r->session_len, "worker exited");
}

/* SB-I-40: responses the worker wrote before exiting are still in the
 * pipe: route them before the cleanup discards what they answer. Orphans
 * of the worker may go on writing into that pipe forever, so what is
 * read is what the pipe holds now, and no more. */
static void drain_at_exit(sb_daemon *d, sb_worker *w) {
    sb_peer *p = &w->peer;
    if (p->in_fd < 0)
        return;
    size_t left = sb_worker_pipe_pending(p->in_fd);
    while (left > 0 && !w->muted && !p->blocked_on && !p->doomed) {
        size_t avail;
        char *space = sb_frame_space(&p->in, &avail);
        if (!space) {
            if (errno != ENOMEM)
                input_overflow(d, p);
            return;
        }
        ssize_t got;
        do
            got = read(p->in_fd, space, avail < left ? avail : left);
        while (got < 0 && errno == EINTR);
        if (got <= 0)
            return;
        sb_frame_commit(&p->in, (size_t)got);
        left -= (size_t)got;
        if (process_lines(d, p) == STDIO_BUS_EFULL) {
            input_overflow(d, p);
            return;
        }
    }
}

static void worker_exited(sb_daemon *d, sb_worker *w, int status) {
    drain_at_exit(d, w);
    d->live_workers--;
    if (sb_frame_pending(&w->peer.in)) /* SB-I-25 */
        sb_warn(w->peer.name, "%zu byte(s) after its last newline discarded",
                sb_frame_pending(&w->peer.in));
    /* An exit we asked for is news, not a warning. */
    bool asked = d->phase >= SB_PHASE_DRAINING ||
                 (w->pool->per_connection && !sb_affinity_count(&d->router.affinity, w->id));
    sb_log_level level = asked ? SB_LOG_INFO : SB_LOG_WARN; /* SB-X-16: its client left */
    if (WIFSIGNALED(status))
        sb_log(level, w->peer.name, "exited: killed by signal %d (%s)", WTERMSIG(status),
               strsignal(WTERMSIG(status)));
    else
        sb_log(level, w->peer.name, "exited with status %d", WEXITSTATUS(status));

    /* SB-7.1.2-1..4, each step logged. */
    w->state = SB_WORKER_STOPPED;
    sb_router_set_running(&d->router, w->id, false);
    sb_info(w->peer.name, "state STOPPED");
    worker_close_fds(d, w);
    sb_info(w->peer.name, "pipes closed");
    invalidate_sessions(d, w);
    orphan_ctx oc = {d, w};
    int discarded = sb_pending_drop_receiver(&d->router.requests, w->id, discard_orphan, &oc);
    sb_pending_drop_sender(&d->router.upstream, w->id, NULL, NULL);
    if (discarded)
        sb_warn(w->peer.name, "%d pending request(s) discarded", discarded);
    if (d->held_count)
        release_held(d); /* SB-I-45: its ids are free */
    w->pid = -1;
    w->kill_at_ms = 0;
    w->lost_ms = 0;

    if (affinity_worker_exited(d, w))
        return; /* SB-X-15: a per-connection slot waits for its next connection */
    if (d->phase >= SB_PHASE_DRAINING)
        return;
    /* SB-7.1.3-1..3, SB-I-9, SB-I-10 */
    long delay = sb_restart_decide(&w->restarts, d->limits, now_ms());
    if (delay < 0) {
        w->given_up = true;
        sb_error(w->peer.name,
                 "not restarting: %d restart(s) within restart_window_sec=%d (max_restarts=%d)",
                 sb_restart_recent(&w->restarts, d->limits, now_ms()),
                 d->limits->restart_window_sec, d->limits->max_restarts);
        return;
    }
    w->restart_at_ms = now_ms() + delay;
    sb_warn(w->peer.name, "restarting in %ld ms", delay);
}

static void on_worker_event(void *data, int fd, short revents) {
    sb_worker *w = data;
    sb_daemon *d = daemon_ctx;
    sb_peer *p = &w->peer;
    if (fd == p->out_fd) {
        if (revents & (POLLERR | POLLHUP)) {
            worker_stdin_lost(d, w);
            return;
        }
        if (revents & POLLOUT) {
            int rc = sb_outq_flush(&p->out, p->out_fd);
            if (rc == STDIO_BUS_EOF || rc == STDIO_BUS_ERR) {
                worker_stdin_lost(d, w);
                return;
            }
            if (!sb_outq_over(&p->out))
                set_full(d, p, false);
            update_interest(d, p);
        }
        return;
    }
    if (fd == p->in_fd && !park_if_paused(d, p, fd, revents))
        read_input(d, p);
}

static void on_worker_stderr(void *data, int fd, short revents) {
    sb_worker *w = data;
    sb_daemon *d = daemon_ctx;
    (void)revents;
    if (sb_worker_relay_stderr(w, false) == STDIO_BUS_EOF) {
        sb_loop_del(&d->loop, fd);
        close(fd);
        w->stderr_fd = -1;
    }
}

static void reap_children(sb_daemon *d) {
    /* SB-7.1.1-2: WNOHANG in a loop; one SIGCHLD may stand for many exits. */
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0)
            return;
        for (int i = 0; i < d->worker_count; i++) {
            if (d->workers[i].pid == pid) {
                /* Routing its last lines may fail it (5.3): no signal then. */
                d->workers[i].reaped = true;
                worker_exited(d, &d->workers[i], status);
                break;
            }
        }
    }
}

/* ---- connection affinity (SB-X-10..SB-X-16) ------------------------ */

/* SB-X-15: a connection to a per_connection pool gets a worker of its own,
 * spawned now, before its first line is read (as SB-I-38), in a slot whose
 * last process has been reaped. Returns false when there is none (every
 * slot in use, or the spawn failed): the caller closes the connection. */
static bool affinity_attach(sb_daemon *d, sb_peer *c) {
    if (d->cfg->affinity != SB_AFFINITY_EXCLUSIVE)
        return true;
    for (int i = 0; i < d->worker_count; i++) {
        sb_worker *w = &d->workers[i];
        if (w->pid > 0)
            continue;
        if (worker_spawn(d, w) < 0) {
            sb_warn(c->name, "refused: its worker could not be started");
            return false;
        }
        sb_affinity_bind(&d->router.affinity, c->index, w->id);
        sb_info(c->name, "bound to %s, started for it", w->peer.name);
        return true;
    }
    sb_warn(c->name, "refused: all %d worker(s) of the per_connection pool are in use",
            d->worker_count);
    return false;
}

/* The client leaves: it is unbound, and (SB-X-16) its own worker is
 * stopped as at shutdown: stdin closed, SIGTERM, SIGKILL after
 * drain_timeout_sec. */
static void affinity_detach(sb_daemon *d, sb_peer *c) {
    if (d->cfg->affinity == SB_AFFINITY_NONE)
        return;
    int id = sb_affinity_unbind(&d->router.affinity, c->index);
    if (id < 0 || d->cfg->affinity != SB_AFFINITY_EXCLUSIVE)
        return;
    sb_worker *w = &d->workers[id];
    if (w->pid <= 0 || w->state != SB_WORKER_RUNNING)
        return; /* already on its way out */
    sb_info(w->peer.name, "its client left: stopping it");
    w->state = SB_WORKER_STOPPING;
    worker_stdin_lost(d, w); /* closes its stdin; no longer RUNNING, so no grace timer */
    w->kill_at_ms = now_ms() + (int64_t)d->limits->drain_timeout_sec * 1000;
    sb_worker_signal(w, SIGTERM);
    update_interest(d, &w->peer);
}

/* SB-X-14: a worker's exit ends the connections bound to it, whose server
 * state is gone with it (as the MCP stdio transport ends when its server
 * dies). What the worker wrote before exiting has been routed (SB-I-40):
 * the client is no longer read, and is closed once its output queue is
 * written, or after drain_timeout_sec. At shutdown the connections stay
 * until the end (SB-I-21). Returns true for a per_connection slot, which
 * is not restarted (SB-X-15). */
static bool affinity_worker_exited(sb_daemon *d, sb_worker *w) {
    if (d->cfg->affinity == SB_AFFINITY_NONE)
        return false;
    int client;
    while ((client = sb_affinity_first(&d->router.affinity, w->id)) >= 0) {
        sb_affinity_unbind(&d->router.affinity, client);
        sb_peer *c = &d->clients[client];
        if (d->phase >= SB_PHASE_DRAINING || c->doomed || c->closing_since_ms)
            continue;
        sb_warn(c->name, "its worker %d exited: closing the connection once its output is written",
                w->id);
        c->closing_since_ms = now_ms();
        d->closing_count++;
        update_interest(d, c);
        if (!c->dirty)
            affinity_close_if_flushed(d, c);
    }
    return w->pool->per_connection;
}

/* A closing client whose output queue is empty is closed now. */
static void affinity_close_if_flushed(sb_daemon *d, sb_peer *c) {
    if (c->closing_since_ms && c->kind == SB_PEER_CLIENT && sb_outq_len(&c->out) == 0)
        doom(d, c);
}

static void affinity_check_closing(sb_daemon *d, int64_t now) {
    int64_t limit = (int64_t)d->limits->drain_timeout_sec * 1000;
    for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS; i++) {
        sb_peer *c = &d->clients[i];
        if (c->kind == SB_PEER_CLIENT && c->closing_since_ms && !c->doomed &&
            now - c->closing_since_ms >= limit) {
            sb_warn(c->name, "output not written within drain_timeout_sec=%d: closing",
                    d->limits->drain_timeout_sec);
            doom(d, c);
        }
    }
}

static int64_t affinity_next_deadline(const sb_daemon *d, int64_t next) {
    int64_t limit = (int64_t)d->limits->drain_timeout_sec * 1000;
    for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS; i++) {
        const sb_peer *c = &d->clients[i];
        if (c->kind == SB_PEER_CLIENT && c->closing_since_ms && !c->doomed &&
            c->closing_since_ms + limit < next)
            next = c->closing_since_ms + limit;
    }
    return next;
}

/* ---- shutdown (spec 10) --------------------------------------------- */

static void remove_socket_file(sb_daemon *d) {
    if (!sb_net_unlink_unix(d->unix_path, &d->unix_id)) /* SB-I-22 */
        sb_warn(NULL, "unix:%s is no longer our socket file: left in place", d->unix_path);
    d->unix_path = NULL;
}

static void begin_shutdown(sb_daemon *d, const char *why) {
    if (d->phase >= SB_PHASE_DRAINING)
        return; /* SB-I-21: a second trigger changes nothing */
    sb_info(NULL, "shutting down (%s)", why);
    d->phase = SB_PHASE_DRAINING;
    d->drain_deadline_ms = now_ms() + (int64_t)d->limits->drain_timeout_sec * 1000;
    if (d->listen_fd >= 0) { /* SB-10.2-1 */
        sb_loop_del(&d->loop, d->listen_fd);
        close(d->listen_fd);
        d->listen_fd = -1;
        d->accept_resume_ms = 0;
        if (d->accept_failing)
            sb_info(NULL, "%ld connection(s) closed unserved since accept() last failed",
                    d->accept_refused);
        if (d->unix_path)
            remove_socket_file(d);
    }
    for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS; i++)
        if (d->clients[i].kind == SB_PEER_CLIENT)
            update_interest(d, &d->clients[i]);
    for (int i = 0; i < d->worker_count; i++) { /* SB-10.2-2 */
        sb_worker *w = &d->workers[i];
        w->restart_at_ms = 0;
        if (w->pid <= 0)
            continue;
        if (w->state == SB_WORKER_RUNNING)
            w->state = SB_WORKER_STOPPING;
        sb_router_set_running(&d->router, w->id, false);
        if (w->peer.out_fd >= 0) {
            sb_loop_del(&d->loop, w->peer.out_fd);
            close(w->peer.out_fd);
            w->peer.out_fd = -1;
        }
        sb_worker_signal(w, SIGTERM);
        sb_info(w->peer.name, "SIGTERM sent");
        update_interest(d, &w->peer);
    }
}

static bool clients_flushed(const sb_daemon *d) {
    for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS; i++)
        if (d->clients[i].kind == SB_PEER_CLIENT && sb_outq_len(&d->clients[i].out) &&
            !d->clients[i].doomed)
            return false;
    return true;
}

static void kill_remaining(sb_daemon *d) {
    /* SB-10.2-4 */
    for (int i = 0; i < d->worker_count; i++) {
        sb_worker *w = &d->workers[i];
        if (w->pid <= 0)
            continue;
        sb_warn(w->peer.name, "still running after drain_timeout_sec=%d: SIGKILL",
                d->limits->drain_timeout_sec);
        sb_worker_signal(w, SIGKILL);
        int status;
        while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR) {
        }
        w->reaped = true;
        worker_exited(d, w, status);
    }
}

/* ---- the loop ------------------------------------------------------- */

static void on_signal_event(void *data, int fd, short revents) {
    sb_daemon *d = data;
    (void)fd;
    (void)revents;
    int sig;
    bool child = false;
    while ((sig = sb_signals_next()) > 0) {
        if (sig == SIGCHLD)
            child = true;
        else if (sig == SIGTERM || sig == SIGINT || sig == SIGQUIT) /* SB-3.1-6, SB-I-48 */
            begin_shutdown(d, sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "SIGQUIT");
        else /* SB-I-48: SIGHUP, SIGUSR1, SIGUSR2 */
            sb_info(NULL, "%s received: ignored (nothing to reload)",
                    sig == SIGHUP    ? "SIGHUP"
                    : sig == SIGUSR1 ? "SIGUSR1"
                                     : "SIGUSR2");
    }
    if (child) /* SB-7.1.1-1 */
        reap_children(d);
}

/* Log lines that stderr could not take were dropped (log.c): the count is
 * written as soon as stderr takes lines again, even if no new line comes. */
static void on_stderr_event(void *data, int fd, short revents) {
    sb_daemon *d = data;
    int rc = revents & (POLLERR | POLLHUP | POLLNVAL) ? STDIO_BUS_ERR : sb_log_flush();
    if (rc == 0)
        return; /* still full: wait again */
    sb_loop_del(&d->loop, fd);
    d->stderr_watch = rc < 0 ? -1 : 0;
    d->stderr_failed_at = sb_log_clears;
}

static void tend_stderr(sb_daemon *d) {
    if (d->stderr_watch < 0 && d->stderr_failed_at != sb_log_clears)
        d->stderr_watch = 0; /* stderr took lines since it failed: watch it again */
    if (d->stderr_watch == 0 &&
        sb_loop_add(&d->loop, STDERR_FILENO, POLLOUT, on_stderr_event, d) == 0)
        d->stderr_watch = 1;
}

static void finish_round(sb_daemon *d) {
    /* Peers resumed after backpressure may hold complete lines that no new
     * read will announce. */
    for (int i = 0; i < d->ready_count; i++) {
        sb_peer *p = d->ready[i];
        p->queued = false;
        if (p->kind != SB_PEER_FREE && !p->doomed && process_lines(d, p) == STDIO_BUS_EFULL)
            input_overflow(d, p);
    }
    d->ready_count = 0;
    flush_dirty(d);
    for (int i = 0; i < d->doomed_count; i++) {
        sb_peer *p = d->doomed[i];
        if (p->kind == SB_PEER_CLIENT)
            client_close(d, p);
    }
    d->doomed_count = 0;
}

/* Buffers of a client that has not sent anything for a sweep period go
 * back to the allocator, so an idle connection costs a few hundred bytes
 * (issue 7) while a busy one allocates nothing per message. The sweep
 * timer runs only while some client still holds buffers. */
static void check_pending_full(sb_daemon *d);

static void sweep_idle(sb_daemon *d, int64_t now) {
    if (!d->next_sweep_ms || now < d->next_sweep_ms)
        return;
    check_pending_full(d); /* SB-I-47: while clients are active, once a sweep period */
    bool again = false;
    for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS; i++) {
        sb_peer *c = &d->clients[i];
        if (c->kind != SB_PEER_CLIENT)
            continue;
        if (!c->active && sb_frame_pending(&c->in) == 0)
            sb_frame_shrink(&c->in);
        if (!c->active && sb_outq_len(&c->out) == 0)
            sb_outq_clear(&c->out);
        if (c->active || c->in.data || c->out.data)
            again = true;
        c->active = false;
    }
    d->next_sweep_ms = again ? now + SB_IDLE_SWEEP_MS : 0;
}

/* SB-I-47: requests of departed clients may fill the pending table until
 * their worker answers or exits. Say once per episode how much of it they
 * hold, so that the worker to restart can be found. */
static void check_pending_full(sb_daemon *d) {
    const sb_pending *t = &d->router.requests;
    if (t->count < t->capacity) {
        d->pending_full = false;
        return;
    }
    if (d->pending_full)
        return;
    d->pending_full = true;
    sb_warn(NULL,
            "pending request table full (%d entries, %d of them for clients that have left): "
            "new requests are discarded until workers answer or exit",
            t->capacity, d->orphans);
}

static void check_rare(sb_daemon *d, int64_t now) {
    d->rare_at_ms = 0;
    if (d->accept_resume_ms && now >= d->accept_resume_ms) {
        d->accept_resume_ms = 0;
        if (d->listen_fd >= 0)
            sb_loop_set(&d->loop, d->listen_fd, POLLIN);
    }
    if (d->accept_resume_ms)
        rare_at(d, d->accept_resume_ms);
    for (int i = 0; i < d->ending_count; i++)
        if (!d->ending[i]->doomed)
            rare_at(d, d->ending[i]->ending_by_ms);
}

static void check_timers(sb_daemon *d, int64_t now) {
    sweep_idle(d, now);
    if (d->ending_count) /* answers routed last turn may have settled them */
        close_ended_clients(d, now);
    if (d->rare_at_ms && now >= d->rare_at_ms)
        check_rare(d, now);
    for (int i = 0; i < d->worker_count; i++) {
        sb_worker *w = &d->workers[i];
        if (w->restart_at_ms && now >= w->restart_at_ms && d->phase < SB_PHASE_DRAINING) {
            if (worker_spawn(d, w) < 0 && w->pid <= 0) {
                /* exec failed: count it as an exit of this slot */
                long delay = sb_restart_decide(&w->restarts, d->limits, now);
                if (delay < 0) {
                    w->given_up = true;
                    w->restart_at_ms = 0;
                    sb_error(w->peer.name, "not restarting: max_restarts reached");
                } else {
                    w->restart_at_ms = now + delay;
                }
            }
        }
        if (w->lost_ms && now >= w->lost_ms) {
            w->lost_ms = 0;
            if (w->pid > 0 && w->state == SB_WORKER_RUNNING) { /* SB-I-39, SB-I-46 */
                if (w->lost_stdout)
                    worker_fail(d, w, SB_MUTE_OUTPUT, "closed its stdout");
                else
                    worker_fail(d, w, SB_KEEP_OUTPUT, "closed its stdin");
            }
        }
        if (w->kill_at_ms && now >= w->kill_at_ms && w->pid > 0 && d->phase < SB_PHASE_DRAINING) {
            sb_warn(w->peer.name, "did not exit after SIGTERM: SIGKILL");
            sb_worker_signal(w, SIGKILL);
            w->kill_at_ms = 0;
        }
    }
    if (d->closing_count)
        affinity_check_closing(d, now);
    for (int i = 0; i < d->held_count; i++) { /* SB-I-45 */
        sb_peer *c = d->held[i];
        if (!c->doomed &&
            now - c->held_since_ms >= (int64_t)d->limits->backpressure_timeout_sec * 1000) {
            sb_error(c->name,
                     "request held for backpressure_timeout_sec=%d: its id stays in use on every "
                     "worker it could go to: closing",
                     d->limits->backpressure_timeout_sec);
            doom(d, c);
        }
    }
    if (d->full_outputs > 0) { /* SB-7.3.1-4 */
        int64_t limit = (int64_t)d->limits->backpressure_timeout_sec * 1000;
        for (int i = 0; i < d->worker_count; i++) {
            sb_worker *w = &d->workers[i];
            if (w->peer.full_since_ms && now - w->peer.full_since_ms >= limit)
                worker_fail(d, w, SB_KEEP_OUTPUT,
                            "stdin queue full for backpressure_timeout_sec=%d",
                            d->limits->backpressure_timeout_sec);
        }
        for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS; i++) {
            sb_peer *c = &d->clients[i];
            if (c->kind == SB_PEER_CLIENT && c->full_since_ms && !c->doomed &&
                now - c->full_since_ms >= limit) {
                sb_error(c->name, "output queue full for backpressure_timeout_sec=%d: closing",
                         d->limits->backpressure_timeout_sec);
                doom(d, c);
            }
        }
    }
}

static int64_t next_deadline(const sb_daemon *d) {
    int64_t next = INT64_MAX;
    for (int i = 0; i < d->worker_count; i++) {
        const sb_worker *w = &d->workers[i];
        if (w->restart_at_ms && w->restart_at_ms < next)
            next = w->restart_at_ms;
        if (w->kill_at_ms && w->kill_at_ms < next)
            next = w->kill_at_ms;
        if (w->lost_ms && w->lost_ms < next)
            next = w->lost_ms;
    }
    if (d->full_outputs > 0) {
        int64_t limit = (int64_t)d->limits->backpressure_timeout_sec * 1000;
        for (int i = 0; i < d->worker_count; i++)
            if (d->workers[i].peer.full_since_ms && d->workers[i].peer.full_since_ms + limit < next)
                next = d->workers[i].peer.full_since_ms + limit;
        for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS; i++)
            if (d->clients[i].kind == SB_PEER_CLIENT && d->clients[i].full_since_ms &&
                d->clients[i].full_since_ms + limit < next)
                next = d->clients[i].full_since_ms + limit;
    }
    for (int i = 0; i < d->held_count; i++) {
        int64_t at =
            d->held[i]->held_since_ms + (int64_t)d->limits->backpressure_timeout_sec * 1000;
        if (at < next)
            next = at;
    }
    if (d->closing_count)
        next = affinity_next_deadline(d, next);
    if (d->phase == SB_PHASE_LINGER && d->linger_deadline_ms < next)
        next = d->linger_deadline_ms;
    if (d->phase == SB_PHASE_DRAINING && d->drain_deadline_ms < next)
        next = d->drain_deadline_ms;
    if (d->next_sweep_ms && d->next_sweep_ms < next)
        next = d->next_sweep_ms;
    if (d->rare_at_ms && d->rare_at_ms < next)
        next = d->rare_at_ms;
    return next;
}

static void check_phase(sb_daemon *d, int64_t now) {
    if (d->phase == SB_PHASE_LINGER) {
        const sb_peer *c = &d->clients[0];
        bool client_done =
            c->kind != SB_PEER_CLIENT || (!client_has_pending(d, c) && sb_outq_len(&c->out) == 0);
        if (client_done)
            begin_shutdown(d, "stdin EOF, nothing in flight");
        else if (now >= d->linger_deadline_ms)
            begin_shutdown(d, "stdin EOF, drain_timeout_sec reached with requests in flight");
    }
    if (d->phase == SB_PHASE_DRAINING) {
        if (d->live_workers == 0 && clients_flushed(d))
            d->phase = SB_PHASE_DONE;
        else if (now >= d->drain_deadline_ms) {
            kill_remaining(d);
            d->phase = SB_PHASE_DONE;
        }
    }
}

static int daemon_init(sb_daemon *d, const sb_config *cfg, const sb_options *opt) {
    memset(d, 0, sizeof *d);
    d->cfg = cfg;
    d->limits = &cfg->limits;
    d->mode = opt->mode;
    d->listen_fd = -1;
    d->spare_fd = -1;
    d->signal_fd = -1;
    d->worker_count = cfg->worker_count;
    int peers = STDIO_BUS_MAX_CONNECTIONS + cfg->worker_count;
    d->workers = calloc((size_t)cfg->worker_count, sizeof *d->workers);
    d->clients = calloc(STDIO_BUS_MAX_CONNECTIONS, sizeof *d->clients);
    d->free_clients = malloc(STDIO_BUS_MAX_CONNECTIONS * sizeof *d->free_clients);
    d->ready = malloc((size_t)peers * sizeof *d->ready);
    d->doomed = malloc((size_t)peers * sizeof *d->doomed);
    d->dirty = malloc((size_t)peers * sizeof *d->dirty);
    d->held = malloc(STDIO_BUS_MAX_CONNECTIONS * sizeof *d->held);
    d->ending = malloc(STDIO_BUS_MAX_CONNECTIONS * sizeof *d->ending);
    if (!d->workers || !d->clients || !d->free_clients || !d->ready || !d->doomed || !d->dirty ||
        !d->held || !d->ending || sb_loop_init(&d->loop) < 0 ||
        sb_router_init(&d->router, cfg->worker_count, STDIO_BUS_MAX_CONNECTIONS) < 0 ||
        sb_router_set_affinity(&d->router, cfg->affinity) < 0) {
        sb_error(NULL, "out of memory at start-up");
        return STDIO_BUS_ERR;
    }
    for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS; i++) {
        d->clients[i].in_fd = d->clients[i].out_fd = -1;
        d->free_clients[i] = STDIO_BUS_MAX_CONNECTIONS - 1 - i; /* hand out slot 0 first */
    }
    d->free_count = STDIO_BUS_MAX_CONNECTIONS;
    int id = 0;
    for (int p = 0; p < cfg->pool_count; p++) /* SB-I-13: ids in config order */
        for (int k = 0; k < cfg->pools[p].instances; k++, id++)
            if (sb_worker_init(&d->workers[id], id, &cfg->pools[p], d->limits) < 0) {
                sb_error(NULL, "out of memory at start-up");
                return STDIO_BUS_ERR;
            }
    return STDIO_BUS_OK;
}

static void daemon_fini(sb_daemon *d) {
    /* SB-10.2-5 */
    for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS && d->clients; i++)
        if (d->clients[i].kind == SB_PEER_CLIENT) {
            sb_peer *c = &d->clients[i];
            if (c->in_fd > STDERR_FILENO)
                close(c->in_fd);
            if (c->out_fd > STDERR_FILENO && c->out_fd != c->in_fd)
                close(c->out_fd);
            sb_frame_fini(&c->in);
            sb_outq_fini(&c->out);
        }
    for (int i = 0; i < d->worker_count && d->workers; i++) {
        worker_close_fds(d, &d->workers[i]);
        sb_worker_fini(&d->workers[i]);
    }
    if (d->listen_fd >= 0) {
        close(d->listen_fd);
        if (d->unix_path)
            remove_socket_file(d);
    }
    if (d->spare_fd >= 0)
        close(d->spare_fd);
    if (d->signal_fd >= 0)
        sb_signals_close();
    if (d->mode == SB_MODE_STDIO) { /* give the terminal back as we found it */
        fcntl(STDIN_FILENO, F_SETFL, d->stdin_flags);
        fcntl(STDOUT_FILENO, F_SETFL, d->stdout_flags);
    }
    sb_router_fini(&d->router);
    sb_loop_fini(&d->loop);
    free(d->workers);
    free(d->clients);
    free(d->free_clients);
    free(d->ready);
    free(d->doomed);
    free(d->dirty);
    free(d->held);
    free(d->ending);
}

static int open_clients(sb_daemon *d, const sb_options *opt) {
    char err[512];
    if (opt->mode == SB_MODE_STDIO) { /* SB-4.1.2-1: exactly one client */
        d->stdin_flags = fcntl(STDIN_FILENO, F_GETFL);
        d->stdout_flags = fcntl(STDOUT_FILENO, F_GETFL);
        if (d->stdin_flags < 0 || d->stdout_flags < 0) {
            sb_error(NULL, "stdio mode needs open stdin and stdout");
            return STDIO_BUS_ERR;
        }
        fcntl(STDIN_FILENO, F_SETFL, d->stdin_flags | O_NONBLOCK);
        fcntl(STDOUT_FILENO, F_SETFL, d->stdout_flags | O_NONBLOCK);
        sb_peer *c = client_open(d, STDIN_FILENO, STDOUT_FILENO);
        if (!c) {
            sb_error(NULL, "out of memory");
            return STDIO_BUS_ERR;
        }
        return affinity_attach(d, c) ? STDIO_BUS_OK : STDIO_BUS_ERR; /* SB-X-15 */
    }
    if (opt->mode == SB_MODE_UNIX) {
        d->listen_fd = sb_net_listen_unix(opt->address, &d->unix_id, err, sizeof err);
        if (d->listen_fd < 0) {
            sb_error(NULL, "%s", err);
            return STDIO_BUS_ERR;
        }
        d->unix_path = opt->address;
        sb_info(NULL, "listening on unix:%s", opt->address);
    } else {
        char host[256], port[16], bound[300];
        sb_cli_split_host_port(opt->address, host, sizeof host, port, sizeof port);
        d->listen_fd = sb_net_listen_tcp(host, port, bound, sizeof bound, err, sizeof err);
        if (d->listen_fd < 0) {
            sb_error(NULL, "%s", err);
            return STDIO_BUS_ERR;
        }
        sb_info(NULL, "listening on tcp:%s", bound);
    }
    d->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (sb_loop_add(&d->loop, d->listen_fd, POLLIN, on_listen_event, d) < 0)
        return STDIO_BUS_ERR;
    return STDIO_BUS_OK;
}

int sb_daemon_run(const sb_config *cfg, const sb_options *opt) {
    sb_daemon d;
    daemon_ctx = &d;
    sb_fdlimit_raise(cfg->worker_count);
    int rc = daemon_init(&d, cfg, opt);
    if (rc == 0) {
        d.signal_fd = sb_signals_open();
        if (d.signal_fd < 0 || sb_loop_add(&d.loop, d.signal_fd, POLLIN, on_signal_event, &d) < 0) {
            sb_error(NULL, "cannot set up signal handling: %s", strerror(errno));
            rc = STDIO_BUS_ERR;
        }
    }
    /* Workers first, so a client's first line finds them running. */
    for (int i = 0; rc == 0 && i < d.worker_count; i++) /* SB-3.1-2; SB-X-15: not per connection */
        if (!d.workers[i].pool->per_connection && worker_spawn(&d, &d.workers[i]) < 0)
            d.workers[i].restart_at_ms = now_ms() + d.limits->restart_backoff_ms;
    if (rc == 0)
        rc = open_clients(&d, opt);
    if (rc < 0) {
        begin_shutdown(&d, "start-up failed");
        while (d.phase != SB_PHASE_DONE) {
            int64_t now = now_ms();
            check_phase(&d, now);
            if (d.phase == SB_PHASE_DONE)
                break;
            sb_loop_run_once(&d.loop, (int)(d.drain_deadline_ms - now));
        }
        daemon_fini(&d);
        return 1;
    }
    sb_info(NULL, "stdio_bus %s ready: %d pool(s), %d worker(s), %s mode", SB_VERSION,
            cfg->pool_count, cfg->worker_count,
            opt->mode == SB_MODE_STDIO  ? "stdio"
            : opt->mode == SB_MODE_UNIX ? "unix"
                                        : "tcp");

    while (d.phase != SB_PHASE_DONE) {
        int64_t now = now_ms();
        check_timers(&d, now);
        finish_round(&d);
        check_phase(&d, now);
        if (d.phase == SB_PHASE_DONE)
            break;
        if (sb_log_backlog())
            tend_stderr(&d);
        int64_t deadline = next_deadline(&d);
        int timeout = -1; /* nothing scheduled: sleep until an fd or a signal wakes us */
        if (deadline != INT64_MAX) {
            /* One clock read a turn: the time this turn took (well under a
             * millisecond but for huge batches) only makes a timer late by
             * as much, and saves a clock read per message at low load. */
            int64_t wait = deadline - now;
            timeout = wait < 0 ? 0 : wait > 60000 ? 60000 : (int)wait;
        }
        if (sb_loop_run_once(&d.loop, timeout) < 0) {
            sb_error(NULL, "poll failed: %s", strerror(errno));
            begin_shutdown(&d, "poll failure");
        }
        finish_round(&d);
    }
    flush_dirty(&d); /* what the last exits wrote, as far as clients take it */
    sb_info(NULL, "shutdown complete");
    daemon_fini(&d);
    return 0; /* SB-10.2-6 */
}
