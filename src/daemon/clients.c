#include "clients.h"
#include "budget.h"
#include "bus_limits.h"
#include "client_state.h"
#include "clock.h"
#include "log.h"
#include "net.h"
#include "phase.h"
#include "relay.h"
#include "status.h"
#include "supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void on_client_event(sb_loop *l, void *data, int fd, short revents);

/* ---- clients -------------------------------------------------------- */

sb_client *sb_clients_open(sb_bus *d, int in_fd, int out_fd) {
    sb_client *c = sb_client_table_take(&d->clients);
    if (!c)
        return NULL;
    int slot = c->peer.index;
    c->peer.kind = SB_PEER_CLIENT;
    c->peer.in_fd = in_fd;
    c->peer.out_fd = out_fd;
    c->peer.on_event = on_client_event;
    sb_client_enter(d, c, SB_CLIENT_OPEN);
    sb_frame_init(&c->peer.in, d->limits->max_input_buffer);
    sb_outq_init(&c->peer.out, d->limits->max_output_queue);
    if (in_fd == out_fd)
        snprintf(c->peer.name, sizeof c->peer.name, "client fd=%d", in_fd);
    else
        snprintf(c->peer.name, sizeof c->peer.name, "client stdio");
    if (sb_loop_add(&d->loop, in_fd, POLLIN, on_client_event, c) < 0 ||
        (out_fd != in_fd && sb_loop_add(&d->loop, out_fd, 0, on_client_event, c) < 0)) {
        sb_loop_del(&d->loop, in_fd);
        sb_client_enter(d, c, SB_CLIENT_FREE);
        c->peer.kind = SB_PEER_FREE;
        sb_client_table_give_back(&d->clients, c);
        return NULL;
    }
    sb_router_add_client(&d->router, slot); /* SB-I-51: it has a share from now on */
    return c;
}

static void log_client_request_dropped(void *ctx, const sb_request *r) {
    sb_client *c = ctx;
    sb_debug(c->peer.name, "pending request id=%.*s to worker %d discarded", (int)r->id_len, r->id,
             r->receiver);
}

/* What a close discards of its input: complete lines not routed yet (held,
 * SB-I-45, or not reached), and a partial line (SB-I-25). */
static void log_unrouted_input(const sb_client *c, bool with_partial) {
    size_t partial;
    size_t lines = sb_frame_unreturned_lines(&c->peer.in, &partial);
    if (lines)
        sb_warn(c->peer.name, "%zu complete line(s) not routed yet discarded", lines);
    if (partial && with_partial)
        sb_warn(c->peer.name, "%zu byte(s) after the last newline discarded", partial);
}

void sb_clients_close(sb_bus *d, sb_client *c) {
    if (sb_frame_pending(&c->peer.in)) /* stdio's partial line was told of at its EOF */
        log_unrouted_input(c, c->peer.in_fd >= 0);
    int pending; /* SB-7.2-1..3, SB-I-23 */
    int sessions =
        sb_router_drop_client(&d->router, c->peer.index, log_client_request_dropped, c, &pending);
    if (d->client_end)
        d->client_end(d, c, SB_CLIENT_END_GONE); /* SB-X-16 */
    sb_info(c->peer.name,
            "disconnected: %d session(s) invalidated, %d pending request(s) discarded", sessions,
            pending);
    if (pending)
        sb_supervise_shed_orphans(d); /* SB-I-53 */
    for (int which = 0; which < SB_TIMERS_PER_PEER; which++)
        sb_bus_disarm(d, &c->peer, which);
    sb_relay_release_waiters(d, &c->peer);
    if (c->peer.in_fd >= 0) {
        sb_loop_del(&d->loop, c->peer.in_fd);
        if (c->peer.in_fd > STDERR_FILENO)
            close(c->peer.in_fd);
    }
    if (c->peer.out_fd >= 0 && c->peer.out_fd != c->peer.in_fd) {
        sb_loop_del(&d->loop, c->peer.out_fd);
        if (c->peer.out_fd > STDERR_FILENO)
            close(c->peer.out_fd);
    }
    sb_frame_fini(&c->peer.in);
    sb_outq_fini(&c->peer.out);
    d->client_bytes -= c->counted; /* SB-X-17 */
    c->counted = 0;
    sb_client_enter(d, c, SB_CLIENT_FREE);
    c->peer.kind = SB_PEER_FREE;
    c->peer.in_fd = c->peer.out_fd = -1;
    sb_client_table_give_back(&d->clients, c);
    if (d->mode == SB_MODE_STDIO && d->phase < SB_PHASE_DRAINING) {
        sb_info(NULL, "the stdio client is gone: shutting down");
        sb_phase_enter(d, SB_PHASE_LINGER, sb_now_ms()); /* nothing left to deliver to */
    }
}

/* SB-X-17: the clients' buffers are over limits.max_client_memory: close
 * clients until they are within it, in the order of sb_budget_closes_before.
 * Doomed clients are closed at the end of this round, which frees them. */
void sb_clients_enforce_budget(sb_bus *d) {
    d->over_budget = false;
    size_t budget = d->limits->max_client_memory, held = d->client_bytes;
    for (int i = 0; i < d->round.doomed.count; i++)
        if (d->round.doomed.at[i]->kind == SB_PEER_CLIENT)
            held -= sb_bus_client(d, d->round.doomed.at[i])->counted;
    while (held > budget) {
        sb_client *victim = NULL;
        for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS; i++) {
            sb_client *c = &d->clients.at[i];
            if (c->peer.kind != SB_PEER_CLIENT || c->state == SB_CLIENT_DOOMED || !c->counted)
                continue;
            if (!victim || sb_budget_closes_before(c, victim))
                victim = c;
        }
        if (!victim)
            return;
        int64_t since = sb_budget_holding_since(victim);
        sb_warn(victim->peer.name,
                "closing the client: client buffers hold %zu bytes, over "
                "limits.max_client_memory=%zu; it holds %zu%s%s, unmoved for %lld ms",
                held, budget, victim->counted,
                victim->unfinished_since_ms == since && since ? ", an unfinished line" : "",
                victim->peer.full_since_ms ? ", its output stalled over max_output_queue" : "",
                since ? (long long)(sb_now_ms() - since) : 0LL);
        held -= victim->counted;
        sb_client_doom(d, victim);
    }
}

/* Requests of c in flight: pending on a worker, or its next line held
 * back until its id is free (SB-I-45). */
bool sb_clients_has_pending(const sb_bus *d, const sb_client *c) {
    return sb_router_client_has_pending(&d->router, c->peer.index) || c->state == SB_CLIENT_HELD;
}

static bool client_settled(const sb_bus *d, const sb_client *c) {
    return !sb_clients_has_pending(d, c) && sb_outq_len(&c->peer.out) == 0;
}

/* SB-I-41: a socket client's input ended: a half-close (`nc -N`), or a
 * close that looks the same until a write fails. It sends nothing more
 * but may still read: it gets the answers to its requests, then the
 * connection is closed as in 7.2, at the latest after drain_timeout_sec. */
static void client_input_ended(sb_bus *d, sb_client *c) {
    if (client_settled(d, c)) {
        sb_info(c->peer.name, "connection closed by the client");
        sb_client_doom(d, c);
        return;
    }
    sb_info(c->peer.name, "end of input from the client: closing once its answers are delivered");
    if (c->state == SB_CLIENT_HELD) { /* its line is offered again, held with the deadline */
        sb_client_enter(d, c, SB_CLIENT_ENDING);
        sb_relay_mark_ready(d, &c->peer);
    } else if (c->state == SB_CLIENT_OPEN) {
        sb_client_enter(d, c, SB_CLIENT_ENDING);
    }
}

/* Closes the clients of client_input_ended that are owed nothing more;
 * those still owed answers at drain_timeout_sec are closed by their
 * SB_TIMER_ENDING. */
void sb_clients_close_ended(sb_bus *d) {
    for (int i = 0; i < d->round.ending.count; i++) {
        sb_client *c = sb_bus_client(d, d->round.ending.at[i]);
        if (client_settled(d, c)) {
            sb_info(c->peer.name, "answers delivered: closing the connection");
            sb_client_doom(d, c); /* leaves d->ending: look at slot i again */
            i--;
        }
    }
}

/* The client's input ended (EOF, or a read error on stdin): the one place
 * a client's end is seen. */
void sb_clients_input_eof(sb_bus *d, sb_client *p) {
    if (p->peer.in_eof)
        return;
    p->peer.in_eof = true;
    if (d->mode != SB_MODE_STDIO) {
        client_input_ended(d, p);
        return;
    }
    /* SB-I-5: stdin EOF. Deliver what is in flight, then shut down. */
    sb_loop_del(&d->loop, p->peer.in_fd);
    p->peer.in_fd = -1;
    size_t partial; /* complete lines held back (SB-I-45) are still offered */
    sb_frame_unreturned_lines(&p->peer.in, &partial);
    if (partial)
        sb_warn(p->peer.name, "stdin ended inside a line: %zu byte(s) without a newline discarded",
                partial);
    if (p->state == SB_CLIENT_OPEN) /* a held one ends once its line is offered */
        sb_client_enter(d, p, SB_CLIENT_ENDING);
    if (d->phase == SB_PHASE_SERVING) {
        sb_phase_enter(d, SB_PHASE_LINGER,
                       sb_now_ms() + (int64_t)d->limits->drain_timeout_sec * 1000);
        sb_info(p->peer.name,
                "stdin reached EOF: delivering in-flight responses, then shutting down");
    }
}

/* Acts on what the relay reported for the client's input. */
void sb_clients_verdict(sb_bus *d, sb_client *c, sb_relay_verdict v) {
    switch (v.event) {
    case SB_RELAY_OK:
        break;
    case SB_RELAY_ENDED:
        sb_clients_input_eof(d, c);
        break;
    case SB_RELAY_READ_FAILED:
        sb_info(c->peer.name, "read failed (%s): client gone", strerror(v.err));
        sb_client_doom(d, c);
        break;
    case SB_RELAY_OVERFLOW: /* SB-7.3.2-1, SB-7.3.2-2 */
        sb_error(c->peer.name, "line longer than max_input_buffer (%zu bytes): closing the client",
                 d->limits->max_input_buffer);
        sb_client_doom(d, c);
        break;
    case SB_RELAY_NOMEM:
        sb_client_doom(d, c);
        break;
    case SB_RELAY_MALFORMED: /* SB-4.3-1, SB-4.3-2 */
        sb_warn(c->peer.name, "malformed input (%s): closing the client", sb_router_why(v.why));
        sb_client_doom(d, c);
        break;
    }
}

static void on_client_event(sb_loop *l, void *data, int fd, short revents) {
    sb_client *c = data;
    sb_bus *d = sb_bus_of_loop(l);
    if (c->state == SB_CLIENT_DOOMED)
        return;
    if ((revents & POLLOUT) && fd == c->peer.out_fd) {
        if (!sb_relay_write(d, &c->peer))
            return;
    }
    if (c->peer.in_eof && fd == c->peer.in_fd && (revents & (POLLHUP | POLLERR))) {
        /* SB-I-41: after a half-close, the peer is now gone both ways */
        sb_info(c->peer.name, "connection closed by the client");
        sb_client_doom(d, c);
        return;
    }
    if (c->peer.blocked_on && fd == c->peer.in_fd && c->peer.in_fd == c->peer.out_fd &&
        (revents & (POLLHUP | POLLERR)) && !sb_net_has_data(fd)) {
        /* Hung up while paused, nothing left unread: gone (7.2). Lines taken
         * before the pause go with it, like a partial line (SB-I-25). */
        sb_info(c->peer.name, "connection closed by the client while its input was paused");
        sb_client_doom(d, c);
        return;
    }
    if (sb_watch_park_if_paused(d, &c->peer, fd, revents))
        return;
    if (fd == c->peer.in_fd && (revents & (POLLIN | POLLHUP | POLLERR))) {
        sb_clients_verdict(d, c, sb_relay_read(d, &c->peer));
    } else if (fd == c->peer.out_fd && fd != c->peer.in_fd && (revents & (POLLERR | POLLHUP))) {
        sb_info(c->peer.name, "stdout closed by the reader");
        sb_client_doom(d, c);
    }
}

void sb_clients_timer(sb_bus *d, sb_client *c, int which, int64_t now) {
    if (c->peer.kind != SB_PEER_CLIENT || c->state == SB_CLIENT_DOOMED)
        return;
    /* A state's timer is disarmed when the client leaves the state: one
     * that fires is due. */
    switch (which) {
    case SB_TIMER_FULL: /* SB-7.3.1-4 */
        if (c->peer.full_since_ms &&
            now - c->peer.full_since_ms >= (int64_t)d->limits->backpressure_timeout_sec * 1000) {
            sb_error(c->peer.name, "output queue full for backpressure_timeout_sec=%d: closing",
                     d->limits->backpressure_timeout_sec);
            sb_client_doom(d, c);
        }
        break;
    case SB_TIMER_HELD: /* armed once its input ended: SB-I-41, as SB_TIMER_ENDING */
        sb_warn(c->peer.name,
                "answers still owed after drain_timeout_sec=%d: closing the connection",
                d->limits->drain_timeout_sec);
        sb_client_doom(d, c);
        break;
    case SB_TIMER_ENDING: /* SB-I-41: settled ones were closed by sb_clients_close_ended */
        sb_warn(c->peer.name,
                "answers still owed after drain_timeout_sec=%d: closing the connection",
                d->limits->drain_timeout_sec);
        sb_client_doom(d, c);
        break;
    case SB_TIMER_BIND: /* SB-X-24: no worker came free: refused, not bound beside another */
        if (!c->bind_wait_since_ms || c->state == SB_CLIENT_CLOSING)
            break;
        c->bind_wait_since_ms = 0;
        sb_warn(c->peer.name,
                "refused: no worker free of other clients for backpressure_timeout_sec=%d: closing",
                d->limits->backpressure_timeout_sec);
        sb_relay_refuse(d, c,
                        "every worker of the pool serves another client (connection affinity)");
        break;
    case SB_TIMER_CLOSING: /* SB-X-14 */
        sb_warn(c->peer.name, "output not written within drain_timeout_sec=%d: closing",
                d->limits->drain_timeout_sec);
        sb_client_doom(d, c);
        break;
    }
}

/* SB-4.1.2-1: stdio mode has exactly one client, on stdin and stdout. */
int sb_clients_start_stdio(sb_bus *d) {
    d->stdin_flags = fcntl(STDIN_FILENO, F_GETFL);
    d->stdout_flags = fcntl(STDOUT_FILENO, F_GETFL);
    if (d->stdin_flags < 0 || d->stdout_flags < 0) {
        sb_error(NULL, "stdio mode needs open stdin and stdout");
        return STDIO_BUS_ERR;
    }
    fcntl(STDIN_FILENO, F_SETFL, d->stdin_flags | O_NONBLOCK);
    fcntl(STDOUT_FILENO, F_SETFL, d->stdout_flags | O_NONBLOCK);
    sb_client *c = sb_clients_open(d, STDIN_FILENO, STDOUT_FILENO);
    if (!c) {
        sb_error(NULL, "out of memory");
        return STDIO_BUS_ERR;
    }
    return sb_supervise_attach(d, c) ? STDIO_BUS_OK : STDIO_BUS_ERR; /* SB-X-15 */
}
