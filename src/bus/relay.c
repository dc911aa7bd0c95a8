#include "relay.h"
#include "budget.h"
#include "bus_limits.h"
#include "client_state.h"
#include "clock.h"
#include "log.h"
#include "status.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- lifecycle of peers ------------------------------------------- */

void sb_relay_mark_ready(sb_bus *d, sb_peer *p) {
    if (!p->queued && sb_peer_client_state(p) != SB_CLIENT_DOOMED) {
        p->queued = true;
        sb_list_push(&d->round.ready, p);
    }
}

/* SB-I-45: the client's next line has an id whose value is pending on
 * every worker it could go to. It stays in the input buffer, and the client
 * is not read (the socket buffer and max_input_buffer bound what waits),
 * until a pending request ends or the set of running workers changes. */

/* Every held client offers its line again at the end of the round; those
 * whose id is still in use are held again. One whose input ended while it
 * was held (a hang-up) ends once its line is offered. */
void sb_relay_release_held(sb_bus *d) {
    int n = d->round.held.count;
    d->round.held.count = 0; /* all leave it, in the order they were held */
    for (int i = 0; i < n; i++) {
        sb_client *c = sb_bus_client(d, d->round.held.at[i]);
        sb_client_enter(d, c, c->peer.in_eof ? SB_CLIENT_ENDING : SB_CLIENT_OPEN);
        sb_relay_mark_ready(d, &c->peer);
    }
}

/* Every input paused on `out` resumes (SB-7.3.1-3). */
void sb_relay_release_waiters(sb_bus *d, sb_peer *out) {
    if (!out->waiters)
        return; /* most drained outputs paused no one: no scan */
    out->waiters = 0;
    for (int i = 0; i < d->worker_count; i++) {
        sb_peer *p = &d->workers[i].peer;
        if (p->blocked_on == out) {
            p->blocked_on = NULL;
            sb_watch_update(d, p);
            sb_relay_mark_ready(d, p);
        }
    }
    for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS; i++) {
        sb_peer *p = &d->clients.at[i].peer;
        if (p->kind == SB_PEER_CLIENT && p->blocked_on == out) {
            p->blocked_on = NULL;
            sb_watch_update(d, p);
            sb_relay_mark_ready(d, p);
        }
    }
}

void sb_relay_set_full(sb_bus *d, sb_peer *p, bool full) {
    if (full && !p->full_since_ms) {
        p->full_since_ms = sb_now_ms(); /* SB-7.3.1-2 */
        sb_bus_arm(d, p, SB_TIMER_FULL,
                   p->full_since_ms + (int64_t)d->limits->backpressure_timeout_sec * 1000);
        sb_warn(p->name,
                "output queue over max_output_queue (%zu bytes queued): pausing its inputs",
                sb_outq_len(&p->out));
    } else if (!full && p->full_since_ms) {
        p->full_since_ms = 0;
        sb_bus_disarm(d, p, SB_TIMER_FULL);
        sb_info(p->name, "output queue drained below max_output_queue: resuming its inputs");
        sb_relay_release_waiters(d, p);
    }
}

void sb_relay_close_stdin(sb_bus *d, sb_peer *p) {
    if (p->out_fd >= 0) {
        sb_loop_del(&d->loop, p->out_fd);
        close(p->out_fd);
        p->out_fd = -1;
    }
    sb_outq_clear(&p->out);
    if (p->full_since_ms) {
        p->full_since_ms = 0;
        sb_bus_disarm(d, p, SB_TIMER_FULL);
    }
    sb_relay_release_waiters(d, p);
}

void sb_relay_stdin_lost(sb_bus *d, sb_peer *p) {
    if (p->out_fd < 0)
        return;
    sb_relay_close_stdin(d, p);
    sb_worker_publish(&d->workers[p->index], &d->router); /* it takes no more messages */
    sb_list_push(&d->round.stdin_lost, p); /* supervision decides at the end of the round */
    sb_debug(p->name, "its stdin pipe closed");
}

static void output_failed(sb_bus *d, sb_peer *p, int rc) {
    if (p->kind == SB_PEER_WORKER) {
        sb_relay_stdin_lost(d, p);
    } else {
        sb_info(p->name, "client went away (%s)",
                rc == STDIO_BUS_EOF ? "connection closed" : strerror(errno));
        sb_client_doom(d, sb_bus_client(d, p));
    }
}

void sb_relay_recount(sb_bus *d, sb_client *c) {
    sb_budget_note_unread(c);
    size_t now = c->peer.in.cap + c->peer.out.cap;
    d->client_bytes = d->client_bytes - c->counted + now;
    c->counted = now;
    if (d->client_bytes > d->limits->max_client_memory)
        d->over_budget = true;
}

/* Lines at least this long are written at once, straight from the input
 * buffer; shorter ones are queued and written together at the end of the
 * round, one write(2) per destination instead of one per message. */
#define SB_DIRECT_WRITE_MIN 16384

/* Queues one line for p. `from` is the input it came from, paused when p's
 * queue goes over its cap (SB-7.3.1-1, SB-I-17). Lines are never split
 * or interleaved (SB-I-26): each is appended whole behind the last. */
void sb_relay_send(sb_bus *d, sb_peer *p, const char *line, size_t len, sb_peer *from) {
    if (p->out_fd < 0 || sb_peer_client_state(p) == SB_CLIENT_DOOMED)
        return;
    if (len >= SB_DIRECT_WRITE_MIN && sb_outq_len(&p->out) == 0) {
        int rc = sb_outq_send(&p->out, p->out_fd, line, len);
        if (rc == STDIO_BUS_EOF || rc == STDIO_BUS_ERR) {
            output_failed(d, p, rc);
            return;
        }
        if (rc == STDIO_BUS_EAGAIN)
            sb_watch_update(d, p);
    } else {
        if (sb_outq_push(&p->out, line, len) < 0) {
            output_failed(d, p, STDIO_BUS_ERR);
            return;
        }
        if (!p->dirty) {
            p->dirty = true;
            sb_list_push(&d->round.dirty, p);
        }
    }
    if (d->limits->max_client_memory && p->kind == SB_PEER_CLIENT)
        sb_relay_recount(d, sb_bus_client(d, p)); /* SB-X-17 */
    if (sb_outq_over(&p->out)) {
        sb_relay_set_full(d, p, true);
        if (from && !from->blocked_on && from != p) {
            from->blocked_on = p;
            p->waiters++;
            sb_watch_update(d, from);
        }
    }
}

/* The one writable-fd path, for every peer. */
bool sb_relay_write(sb_bus *d, sb_peer *p) {
    int rc = sb_outq_flush(&p->out, p->out_fd);
    if (rc == STDIO_BUS_EOF || rc == STDIO_BUS_ERR) {
        output_failed(d, p, rc);
        return false;
    }
    if (!sb_outq_over(&p->out))
        sb_relay_set_full(d, p, false); /* SB-7.3.1-3 */
    if (d->limits->max_client_memory && p->kind == SB_PEER_CLIENT)
        sb_budget_note_unread(sb_bus_client(d, p)); /* SB-X-17: it read */
    sb_watch_update(d, p);
    sb_worker *w = p->kind == SB_PEER_WORKER ? &d->workers[p->index] : NULL;
    if (w && w->close_when_written && sb_outq_len(&p->out) == 0) { /* SB-X-19 */
        w->close_when_written = false;
        sb_relay_close_stdin(d, p);
    }
    if (p->kind == SB_PEER_CLIENT)
        sb_relay_close_if_flushed(d, sb_bus_client(d, p));
    return true;
}

/* Writes what each output gathered this round. */
void sb_relay_flush(sb_bus *d) {
    for (int i = 0; i < d->round.dirty.count; i++) {
        sb_peer *p = d->round.dirty.at[i];
        p->dirty = false;
        if (p->kind == SB_PEER_FREE || p->out_fd < 0 || sb_peer_client_state(p) == SB_CLIENT_DOOMED)
            continue;
        sb_relay_write(d, p);
    }
    d->round.dirty.count = 0;
}

/* The error reply of SB-X-8 to the sender of a request, client or worker. */
static void send_error_to(sb_bus *d, sb_peer *p, const char *id, size_t id_len, const char *sid,
                          size_t sid_len, const char *why) {
    char reply[STDIO_BUS_MAX_REQUEST_ID_LEN + STDIO_BUS_MAX_SESSION_ID_LEN + 256];
    int n = snprintf(reply, sizeof reply,
                     "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"error\":{\"code\":-32000,\"message\":"
                     "\"stdio_bus: %s\"}%s%.*s}\n",
                     (int)id_len, id, why, sid_len ? ",\"sessionId\":" : "", (int)sid_len, sid);
    if (n > 0 && (size_t)n < sizeof reply)
        sb_relay_send(d, p, reply, (size_t)n, NULL);
}

/* SB-I-8: under orphan_policy "error", a request that can no longer be
 * answered gets a JSON-RPC error instead of silence. */
void sb_relay_send_error(sb_bus *d, sb_client *client, const char *id, size_t id_len,
                         const char *sid, size_t sid_len, const char *why) {
    if (d->cfg->orphan_policy != SB_ORPHAN_ERROR || !client || client->peer.kind != SB_PEER_CLIENT)
        return;
    send_error_to(d, &client->peer, id, id_len, sid, sid_len, why);
}

/* SB-I-52: likewise a worker's request that is not forwarded to its client. */
static void answer_worker(sb_bus *d, sb_peer *w, const sb_fields *f, const char *why) {
    if (d->cfg->orphan_policy != SB_ORPHAN_ERROR || w->out_fd < 0)
        return;
    send_error_to(d, w, f->id.raw, f->id.raw_len, f->session_id.raw, f->session_id.raw_len, why);
}

/* ---- routing ------------------------------------------------------------ */

static void format_tokens(const sb_fields *f, char *out, size_t size) {
    int n = 0;
    out[0] = '\0';
    if (f->id.type)
        n += snprintf(out, size, " id=%.*s", (int)(f->id.raw_len > 64 ? 64 : f->id.raw_len),
                      f->id.raw);
    if (f->session_id.type && (size_t)n < size)
        n += snprintf(out + n, size - (size_t)n, " sessionId=%.*s",
                      (int)(f->session_id.raw_len > 80 ? 80 : f->session_id.raw_len),
                      f->session_id.raw);
}

/* "discarding message: id=1: why", and "discarding message: why" when the
 * line has neither token. */
static const char *colon_after(const char *tokens) {
    return tokens[0] ? ":" : "";
}

/* Returns false when the line must wait (SB_ROUTE_HOLD): it was not
 * consumed, and nothing was recorded for it. A line that is not a JSON-RPC
 * message is consumed and its reason set in *malformed, for the caller's
 * verdict (SB-4.3-1). */
static bool route_from_client(sb_bus *d, sb_client *c, const char *line, size_t len,
                              sb_route_why *malformed) {
    sb_route r = sb_router_from_client(&d->router, c->peer.index, line, len);
    char tokens[200];
    switch (r.action) {
    case SB_ROUTE_IGNORE:
        return true;
    case SB_ROUTE_HOLD:
        c->held_why = (int)r.why;
        if (r.why == SB_WHY_NO_FREE_WORKER && !c->bind_wait_since_ms) { /* SB-X-24 */
            c->bind_wait_since_ms = sb_now_ms();
            sb_bus_arm(d, &c->peer, SB_TIMER_BIND,
                       c->bind_wait_since_ms + (int64_t)d->limits->backpressure_timeout_sec * 1000);
            sb_info(c->peer.name,
                    "waiting for a worker no other client is bound to (at most "
                    "backpressure_timeout_sec=%d)",
                    d->limits->backpressure_timeout_sec);
        } else if (r.why == SB_WHY_CLIENT_SHARE || r.why == SB_WHY_PENDING_FULL) {
            if (!c->share_warned) { /* SB-I-54: one warning per episode */
                format_tokens(&r.fields, tokens, sizeof tokens);
                sb_warn(c->peer.name,
                        "holding its input:%s%s %s (%d requests of it pending): its next request "
                        "waits until some are answered",
                        tokens, colon_after(tokens), sb_router_why(r.why),
                        sb_pending_count_sender(&d->router.requests, c->peer.index));
            }
            c->share_warned = true;
        } else if (sb_log_enabled(SB_LOG_DEBUG)) {
            format_tokens(&r.fields, tokens, sizeof tokens);
            sb_debug(c->peer.name, "holding:%s%s %s", tokens, colon_after(tokens),
                     sb_router_why(r.why));
        }
        return false;
    case SB_ROUTE_REJECT:
        *malformed = r.why;
        return true;
    case SB_ROUTE_DROP:
        format_tokens(&r.fields, tokens, sizeof tokens);
        if (r.why == SB_WHY_FOREIGN_SESSION)
            sb_warn(c->peer.name, "discarding message:%s%s %s (client slot %d)", tokens,
                    colon_after(tokens), sb_router_why(r.why), r.other);
        else
            sb_warn(c->peer.name, "discarding message:%s%s %s", tokens, colon_after(tokens),
                    sb_router_why(r.why));
        if (r.is_request)
            sb_relay_send_error(d, c, r.fields.id.raw, r.fields.id.raw_len, r.fields.session_id.raw,
                                r.fields.session_id.raw_len, sb_router_why(r.why));
        return true;
    case SB_ROUTE_TO_WORKER: {
        sb_peer *w = &d->workers[r.target].peer;
        if (sb_log_enabled(SB_LOG_DEBUG)) {
            format_tokens(&r.fields, tokens, sizeof tokens);
            sb_debug(c->peer.name, "-> %s:%s%s", w->name, tokens,
                     r.new_session ? " (new session)" : "");
        }
        if (r.new_binding) { /* SB-X-11 */
            sb_info(c->peer.name, "bound to %s (affinity)", w->name);
            if (c->bind_wait_since_ms) { /* SB-X-24: the wait is over */
                c->bind_wait_since_ms = 0;
                sb_bus_disarm(d, &c->peer, SB_TIMER_BIND);
            }
        }
        if (c->share_warned && r.is_request) { /* SB-I-54: the episode is over */
            c->share_warned = false;
            sb_info(c->peer.name, "back within its share of the pending request table");
        }
        sb_relay_send(d, w, line, len, &c->peer); /* SB-5.1.1-3: the bytes as received */
        return true;
    }
    case SB_ROUTE_TO_CLIENT:
        break; /* not produced for client input */
    }
    return true;
}

/* Returns SB_WHY_NONE, or the reason the line is malformed (5.3). */
static sb_route_why route_from_worker(sb_bus *d, sb_peer *w, const char *line, size_t len) {
    sb_route r = sb_router_from_worker(&d->router, w->index, line, len);
    char tokens[200];
    switch (r.action) {
    case SB_ROUTE_IGNORE:
        break;
    case SB_ROUTE_REJECT: /* SB-5.3: the worker's supervision fails it */
        return r.why;
    case SB_ROUTE_DROP: /* SB-6.3.1-4, SB-6.3.2-3, SB-6.3.3 */
        format_tokens(&r.fields, tokens, sizeof tokens);
        if (r.why == SB_WHY_UPSTREAM_SHARE || r.why == SB_WHY_UPSTREAM_FULL) {
            sb_client *c = &d->clients.at[r.target]; /* SB-I-52: one warning per episode */
            if (!c->upstream_warned)
                sb_warn(w->name,
                        "discarding request:%s to %s: %s: its requests to that client are "
                        "discarded until it answers some",
                        tokens, c->peer.name, sb_router_why(r.why));
            c->upstream_warned = true;
            answer_worker(d, w, &r.fields, sb_router_why(r.why));
            break;
        }
        sb_warn(w->name, "discarding message:%s%s %s", tokens, colon_after(tokens),
                sb_router_why(r.why));
        if (r.why == SB_WHY_CLIENT_GONE && d->round.held.count)
            d->reoffer_held = true; /* an orphan's id is free again */
        break;
    case SB_ROUTE_TO_CLIENT: {
        sb_client *c = &d->clients.at[r.target];
        if (sb_log_enabled(SB_LOG_DEBUG)) {
            format_tokens(&r.fields, tokens, sizeof tokens);
            sb_debug(w->name, "-> %s:%s", c->peer.name, tokens);
        }
        if (c->upstream_warned && r.fields.method.type && r.fields.id.type) {
            c->upstream_warned = false; /* SB-I-52: a request to it was recorded again */
            sb_info(c->peer.name, "owes answers to fewer worker requests than its share again");
        }
        sb_relay_send(d, &c->peer, line, len, w); /* SB-4.2.3-3: pass-through */
        if (d->round.held.count && (r.fields.result.type || r.fields.error.type))
            d->reoffer_held = true; /* a pending id is free again */
        break;
    }
    case SB_ROUTE_TO_WORKER:
    case SB_ROUTE_HOLD:
        break;
    }
    return SB_WHY_NONE;
}

static sb_relay_verdict verdict(sb_relay_event event, sb_route_why why) {
    sb_relay_verdict v = {event, why, 0};
    return v;
}

/* SB-I-54: a held client's answers to its workers' requests are routed as
 * they are read, past its held request: the worker may answer nothing
 * until it has them, and the held request waits for one of its answers.
 * The other lines stay in their order behind the held one. */
static void route_answers_ahead(sb_bus *d, sb_client *c) {
    const char *line;
    long n;
    char tokens[200];
    while (!c->peer.blocked_on && (n = sb_frame_peek(&c->peer.in, &line)) > 0) {
        sb_route r = sb_router_answer_from_client(&d->router, c->peer.index, line, (size_t)n);
        if (r.action == SB_ROUTE_HOLD) {
            sb_frame_pass(&c->peer.in, (size_t)n);
            continue;
        }
        if (r.action == SB_ROUTE_TO_WORKER) {
            sb_relay_send(d, &d->workers[r.target].peer, line, (size_t)n, &c->peer);
        } else {
            format_tokens(&r.fields, tokens, sizeof tokens);
            sb_warn(c->peer.name, "discarding message:%s%s %s", tokens, colon_after(tokens),
                    sb_router_why(r.why));
        }
        sb_frame_cut(&c->peer.in, (size_t)n);
    }
    sb_watch_update(d, &c->peer); /* read while its buffer has room */
}

sb_relay_verdict sb_relay_process(sb_bus *d, sb_peer *p) {
    const char *line;
    long n;
    bool moved = false;
    sb_client *c = p->kind == SB_PEER_CLIENT ? sb_bus_client(d, p) : NULL; /* else a worker */
    if (c && c->state == SB_CLIENT_HELD) {
        route_answers_ahead(d, c); /* SB-I-54: its next request waits, not its answers */
        return verdict(SB_RELAY_OK, SB_WHY_NONE);
    }
    if (c && c->state == SB_CLIENT_CLOSING)
        return verdict(SB_RELAY_OK, SB_WHY_NONE); /* SB-X-14 */
    while (!p->blocked_on && !(c && c->state == SB_CLIENT_DOOMED)) {
        if (!c && !sb_worker_routes_output(&d->workers[p->index]))
            break; /* a failed worker's further output is not routed */
        if (c && d->phase != SB_PHASE_SERVING && d->phase != SB_PHASE_LINGER)
            break;
        n = sb_frame_next(&p->in, &line);
        if (n == STDIO_BUS_EAGAIN)
            break;
        if (n == STDIO_BUS_EFULL)
            return verdict(SB_RELAY_OVERFLOW, SB_WHY_NONE);
        if (c) {
            moved = true;
            sb_route_why malformed = SB_WHY_NONE;
            if (!route_from_client(d, c, line, (size_t)n, &malformed)) {
                sb_frame_unread(&p->in, (size_t)n);
                sb_frame_hold(&p->in, (size_t)n);
                sb_client_enter(d, c, SB_CLIENT_HELD);
                route_answers_ahead(d, c);
                break;
            }
            if (malformed != SB_WHY_NONE)
                return verdict(SB_RELAY_MALFORMED, malformed);
        } else {
            sb_route_why why = route_from_worker(d, p, line, (size_t)n);
            if (why != SB_WHY_NONE)
                return verdict(SB_RELAY_MALFORMED, why);
        }
    }
    if (c && d->limits->max_client_memory)
        sb_budget_note_unfinished(c, moved); /* SB-X-17 */
    return verdict(SB_RELAY_OK, SB_WHY_NONE);
}

sb_relay_verdict sb_relay_read(sb_bus *d, sb_peer *p) {
    if (p->blocked_on)
        return verdict(SB_RELAY_OK, SB_WHY_NONE); /* paused: its buffered lines go first */
    if (sb_peer_client_state(p) == SB_CLIENT_HELD && !sb_frame_room(&p->in))
        return verdict(SB_RELAY_OK, SB_WHY_NONE); /* SB-I-54: held, its buffer full */
    size_t avail;
    errno = 0;
    char *space = sb_frame_space(&p->in, &avail);
    if (!space) {
        if (errno != ENOMEM)
            return verdict(SB_RELAY_OVERFLOW, SB_WHY_NONE);
        sb_error(p->name, "out of memory for its input buffer");
        return verdict(SB_RELAY_NOMEM, SB_WHY_NONE);
    }
    ssize_t got;
    do
        got = read(p->in_fd, space, avail);
    while (got < 0 && errno == EINTR);
    if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return verdict(SB_RELAY_OK, SB_WHY_NONE);
        sb_relay_verdict v = verdict(SB_RELAY_READ_FAILED, SB_WHY_NONE);
        v.err = errno;
        return v;
    }
    if (got == 0)
        return verdict(SB_RELAY_ENDED, SB_WHY_NONE);
    sb_frame_commit(&p->in, (size_t)got);
    if (p->kind == SB_PEER_CLIENT) {
        sb_client *c = sb_bus_client(d, p);
        c->active = true;
        if (d->limits->max_client_memory)
            sb_relay_recount(d, c); /* SB-X-17: its input buffer may have grown */
        if (!sb_timers_armed(&d->timers, SB_TIMER_SWEEP))
            sb_timers_arm(&d->timers, SB_TIMER_SWEEP, sb_now_ms() + SB_IDLE_SWEEP_MS);
    }
    return sb_relay_process(d, p);
}

/* A closing client whose output queue is empty is closed now. */
void sb_relay_close_if_flushed(sb_bus *d, sb_client *c) {
    if (c->state == SB_CLIENT_CLOSING && sb_outq_len(&c->peer.out) == 0)
        sb_client_doom(d, c);
}
