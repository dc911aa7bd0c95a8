/* Unit tests for a client's life (src/bus/client_state.c, src/daemon/clients.c) and
 * the relay path around it (src/bus/relay.c): a bus of one worker whose stdio
 * are pipes held by the test, and clients on socketpairs. Each test drives
 * the daemon's functions in the order its loop would, and checks the
 * state, the lists and timers the state owns, and what reaches the fds. */
#include <criterion/criterion.h>

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bus_limits.h"
#include "client_state.h"
#include "clients.h"
#include "clock.h"
#include "log.h"
#include "relay.h"
#include "status.h"

static sb_bus d;
static sb_pool_config pool = {.id = "p", .instances = 1};
static sb_config cfg = {
    .pools = &pool,
    .pool_count = 1,
    .worker_count = 1,
    .limits = {.max_input_buffer = SB_DEFAULT_MAX_INPUT_BUFFER,
               .max_output_queue = SB_DEFAULT_MAX_OUTPUT_QUEUE,
               .max_restarts = SB_DEFAULT_MAX_RESTARTS,
               .restart_window_sec = SB_DEFAULT_RESTART_WINDOW_SEC,
               .drain_timeout_sec = SB_DEFAULT_DRAIN_TIMEOUT_SEC,
               .backpressure_timeout_sec = SB_DEFAULT_BACKPRESSURE_TIMEOUT_SEC},
};
static sb_options opt = {.mode = SB_MODE_UNIX};
static int worker_stdin = -1;  /* the test's end: what the daemon sent the worker */
static int worker_stdout = -1; /* the test's end: what the worker answers */

static void setup(void) {
    sb_log_set_level(SB_LOG_ERROR);
    cr_assert_eq(sb_bus_init(&d, &cfg, &opt), STDIO_BUS_OK);
    /* A running worker 0 whose pipes the test holds. */
    int to_worker[2], from_worker[2];
    cr_assert_eq(pipe(to_worker), 0);
    cr_assert_eq(pipe(from_worker), 0);
    sb_worker *w = &d.workers[0];
    w->peer.out_fd = to_worker[1];
    w->peer.in_fd = from_worker[0];
    worker_stdin = to_worker[0];
    worker_stdout = from_worker[1];
    sb_worker_enter(w, SB_WORKER_STARTING, &d.router);
    sb_worker_enter(w, SB_WORKER_RUNNING, &d.router); /* the router's view follows */
}

static void teardown(void) {
    for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS; i++)
        if (d.clients.at[i].peer.kind == SB_PEER_CLIENT) {
            sb_client *c = &d.clients.at[i];
            if (c->state != SB_CLIENT_DOOMED)
                sb_client_doom(&d, c);
            sb_clients_close(&d, c);
        }
    close(d.workers[0].peer.out_fd);
    close(d.workers[0].peer.in_fd);
    close(worker_stdin);
    close(worker_stdout);
    sb_worker_fini(&d.workers[0]);
    sb_bus_fini(&d);
}

TestSuite(clients, .init = setup, .fini = teardown, .timeout = 20);

/* A client on a socketpair; *far is the test's end. */
static sb_client *connect_client(int *far) {
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    sb_client *c = sb_clients_open(&d, sv[0], sv[0]);
    cr_assert_not_null(c);
    *far = sv[1];
    return c;
}

static void say(int fd, const char *line) {
    cr_assert_eq(write(fd, line, strlen(line)), (ssize_t)strlen(line));
}

static bool held(const sb_client *c) {
    for (int i = 0; i < d.round.held.count; i++)
        if (d.round.held.at[i] == &c->peer)
            return true;
    return false;
}

static bool ending(const sb_client *c) {
    for (int i = 0; i < d.round.ending.count; i++)
        if (d.round.ending.at[i] == &c->peer)
            return true;
    return false;
}

static bool doomed(const sb_client *c) {
    for (int i = 0; i < d.round.doomed.count; i++)
        if (d.round.doomed.at[i] == &c->peer)
            return true;
    return false;
}

static bool timer_armed(const sb_peer *p, int which) {
    return sb_timers_armed(&d.timers, sb_bus_timer(&d, p, which));
}

static bool reads(const sb_client *c) {
    return sb_loop_get(&d.loop, c->peer.in_fd) & POLLIN;
}

/* What fd holds now, as a string (the test's end of a pipe or socket). */
static const char *received(int fd) {
    static char buf[4096];
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    ssize_t n = poll(&pfd, 1, 0) == 1 ? read(fd, buf, sizeof buf - 1) : 0;
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

#define REQUEST_1 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\n"
#define ANSWER_1  "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":0}\n"

Test(clients, opened_client_is_open_and_read) {
    int far;
    sb_client *c = connect_client(&far);
    cr_assert_eq(c->state, SB_CLIENT_OPEN);
    cr_assert(reads(c));
    close(far);
}

Test(clients, request_goes_to_the_worker_as_received) {
    int far;
    sb_client *c = connect_client(&far);
    say(far, REQUEST_1);
    cr_assert_eq(sb_relay_read(&d, &c->peer).event, SB_RELAY_OK);
    sb_relay_flush(&d);
    cr_assert_str_eq(received(worker_stdin), REQUEST_1);
    close(far);
}

/* SB-I-45: a second request with an id pending on every worker waits in
 * the client's buffer, the client unread, until the id is answered. */
Test(clients, held_client_is_released_when_its_id_is_answered) {
    int far;
    sb_client *c = connect_client(&far);
    say(far, REQUEST_1 REQUEST_1);
    sb_relay_read(&d, &c->peer);
    cr_assert_eq(c->state, SB_CLIENT_HELD);
    cr_assert(held(c));
    cr_assert_not(timer_armed(&c->peer, SB_TIMER_HELD), "never closed for waiting (SB-I-45)");
    cr_assert(reads(c), "a held client is read for its answers while its buffer has room");
    cr_assert(sb_clients_has_pending(&d, c));

    say(worker_stdout, ANSWER_1);
    cr_assert_eq(sb_relay_read(&d, &d.workers[0].peer).event, SB_RELAY_OK);
    cr_assert(d.reoffer_held, "the answer freed an id");
    cr_assert_eq(c->state, SB_CLIENT_HELD, "released at the end of the round, not before");
    sb_relay_release_held(&d); /* as the end of the round does */
    cr_assert_eq(c->state, SB_CLIENT_OPEN, "released");
    cr_assert_not(held(c));
    cr_assert_not(timer_armed(&c->peer, SB_TIMER_HELD));
    cr_assert(c->peer.queued, "its held line is offered at the end of the round");
    cr_assert(reads(c));

    cr_assert_eq(sb_relay_process(&d, &c->peer).event, SB_RELAY_OK);
    sb_relay_flush(&d);
    cr_assert_str_eq(received(far), ANSWER_1);
    cr_assert_str_eq(received(worker_stdin), REQUEST_1 REQUEST_1);
    close(far);
}

Test(clients, held_timer_dooms_the_client) {
    int far;
    sb_client *c = connect_client(&far);
    say(far, REQUEST_1 REQUEST_1);
    sb_relay_read(&d, &c->peer);
    cr_assert_eq(c->state, SB_CLIENT_HELD);
    sb_clients_timer(&d, c, SB_TIMER_HELD, sb_now_ms());
    cr_assert_eq(c->state, SB_CLIENT_DOOMED);
    cr_assert(doomed(c));
    cr_assert_not(held(c), "leaving HELD leaves the held list");
    close(far);
}

/* SB-I-41: input ended with nothing owed: closed at once (7.2). */
Test(clients, input_end_with_nothing_owed_closes_the_client) {
    int far;
    sb_client *c = connect_client(&far);
    shutdown(far, SHUT_WR);
    cr_assert_eq(sb_relay_read(&d, &c->peer).event, SB_RELAY_ENDED);
    sb_clients_input_eof(&d, c);
    cr_assert_eq(c->state, SB_CLIENT_DOOMED);
    cr_assert(doomed(c));
    int slot = c->peer.index, free_before = d.clients.returned_count;
    sb_clients_close(&d, c);
    cr_assert_eq(c->state, SB_CLIENT_FREE);
    cr_assert_eq(c->peer.kind, SB_PEER_FREE);
    cr_assert_eq(d.clients.returned_count, free_before + 1);
    cr_assert_eq(d.clients.returned[d.clients.returned_count - 1], slot);
    char byte;
    cr_assert_eq(read(far, &byte, 1), 0, "its socket is closed");
    close(far);
}

/* What supervision heard of clients' ends, through sb_bus.client_end. */
static sb_client_end heard[8];
static int heard_count;

static void hear(sb_bus *bus, sb_client *c, sb_client_end how) {
    (void)bus;
    (void)c;
    heard[heard_count++] = how;
}

/* A client's end reaches supervision by one route, the hook, each way it
 * ends: doomed when its input ends with nothing owed, gone when closed. */
Test(clients, every_end_of_a_client_reaches_supervision_through_its_hook) {
    heard_count = 0;
    d.client_end = hear;
    int far;
    sb_client *c = connect_client(&far);
    shutdown(far, SHUT_WR);
    cr_assert_eq(sb_relay_read(&d, &c->peer).event, SB_RELAY_ENDED);
    sb_clients_input_eof(&d, c);
    cr_assert_eq(heard_count, 1);
    cr_assert_eq(heard[0], SB_CLIENT_END_DOOMED);
    sb_clients_close(&d, c);
    cr_assert_eq(heard_count, 2);
    cr_assert_eq(heard[1], SB_CLIENT_END_GONE);
    d.client_end = NULL;
    close(far);
}

/* SB-I-41: input ended with an answer owed: ENDING until it is written. */
Test(clients, ending_client_is_closed_once_its_answers_are_written) {
    int far;
    sb_client *c = connect_client(&far);
    say(far, REQUEST_1);
    sb_relay_read(&d, &c->peer);
    shutdown(far, SHUT_WR);
    cr_assert_eq(sb_relay_read(&d, &c->peer).event, SB_RELAY_ENDED);
    sb_clients_input_eof(&d, c);
    cr_assert_eq(c->state, SB_CLIENT_ENDING, "the client ended: one transition");
    cr_assert(ending(c));
    cr_assert(timer_armed(&c->peer, SB_TIMER_ENDING));
    cr_assert_not(reads(c));

    sb_clients_close_ended(&d);
    cr_assert_eq(c->state, SB_CLIENT_ENDING, "still owed its answer");

    say(worker_stdout, ANSWER_1);
    sb_relay_read(&d, &d.workers[0].peer);
    sb_clients_close_ended(&d);
    cr_assert_eq(c->state, SB_CLIENT_ENDING, "answered, not yet written");
    sb_relay_flush(&d);
    sb_clients_close_ended(&d);
    cr_assert_eq(c->state, SB_CLIENT_DOOMED);
    cr_assert_not(ending(c));
    cr_assert_not(timer_armed(&c->peer, SB_TIMER_ENDING));
    cr_assert_str_eq(received(far), ANSWER_1);
    close(far);
}

Test(clients, ending_timer_dooms_a_client_still_owed_answers) {
    int far;
    sb_client *c = connect_client(&far);
    say(far, REQUEST_1);
    sb_relay_read(&d, &c->peer);
    shutdown(far, SHUT_WR);
    sb_relay_read(&d, &c->peer);
    sb_clients_input_eof(&d, c);
    cr_assert_eq(c->state, SB_CLIENT_ENDING);
    sb_clients_timer(&d, c, SB_TIMER_ENDING, sb_now_ms());
    cr_assert_eq(c->state, SB_CLIENT_DOOMED);
    cr_assert_not(ending(c));
    close(far);
}

/* SB-X-14 after SB-I-41: the earlier of the two deadlines stays. */
Test(clients, closing_an_ending_client_keeps_its_earlier_deadline) {
    int far;
    sb_client *c = connect_client(&far);
    say(far, REQUEST_1);
    sb_relay_read(&d, &c->peer);
    shutdown(far, SHUT_WR);
    sb_relay_read(&d, &c->peer);
    sb_clients_input_eof(&d, c);
    int64_t ending_by = sb_timers_deadline(&d.timers, sb_bus_timer(&d, &c->peer, SB_TIMER_ENDING));
    cr_assert_gt(ending_by, 0);
    usleep(20000);
    sb_client_enter(&d, c, SB_CLIENT_CLOSING);
    cr_assert_not(ending(c));
    cr_assert_not(timer_armed(&c->peer, SB_TIMER_ENDING));
    cr_assert_eq(sb_timers_deadline(&d.timers, sb_bus_timer(&d, &c->peer, SB_TIMER_CLOSING)),
                 ending_by);
    close(far);
}

/* A client that hangs up while held keeps its line: it ends (SB-I-41), its
 * line is offered again, and held again it waits at most drain_timeout_sec
 * (SB-I-54: an ended client is not held for ever). */
Test(clients, held_client_whose_input_ends_ends_when_released) {
    int far;
    sb_client *c = connect_client(&far);
    say(far, REQUEST_1 REQUEST_1);
    sb_relay_read(&d, &c->peer);
    cr_assert_eq(c->state, SB_CLIENT_HELD);
    sb_clients_input_eof(&d, c);
    cr_assert(c->peer.in_eof);
    cr_assert_eq(c->state, SB_CLIENT_ENDING, "its line is still to be offered");
    cr_assert(c->peer.queued);
    cr_assert(ending(c));
    sb_relay_process(&d, &c->peer);
    cr_assert_eq(c->state, SB_CLIENT_HELD, "its id is still pending: held again");
    cr_assert(timer_armed(&c->peer, SB_TIMER_HELD), "until drain_timeout_sec");
    close(far);
}

/* SB-X-14: a closing client is not read and is closed once its output is
 * written. */
Test(clients, closing_client_is_doomed_once_its_output_is_written) {
    int far;
    sb_client *c = connect_client(&far);
    sb_relay_send(&d, &c->peer, ANSWER_1, strlen(ANSWER_1), NULL);
    sb_client_enter(&d, c, SB_CLIENT_CLOSING);
    cr_assert(timer_armed(&c->peer, SB_TIMER_CLOSING));
    cr_assert_not(reads(c));
    sb_relay_close_if_flushed(&d, c);
    cr_assert_eq(c->state, SB_CLIENT_CLOSING, "its output is not written yet");
    sb_relay_flush(&d);
    cr_assert_eq(c->state, SB_CLIENT_DOOMED);
    cr_assert_not(timer_armed(&c->peer, SB_TIMER_CLOSING));
    cr_assert_str_eq(received(far), ANSWER_1);
    close(far);
}

/* SB-4.3-1: a malformed line is reported to the client's owner, as every
 * other end of a client's input is, which closes the client. */
Test(clients, malformed_line_is_reported_and_closes_the_client) {
    int far;
    sb_client *c = connect_client(&far);
    say(far, "not json\n{\"jsonrpc\":\"2.0\",\"method\":\"after\"}\n");
    sb_relay_verdict v = sb_relay_read(&d, &c->peer);
    cr_assert_eq(v.event, SB_RELAY_MALFORMED);
    cr_assert_eq(c->state, SB_CLIENT_OPEN, "the relay leaves it to the owner");
    sb_clients_verdict(&d, c, v);
    cr_assert_eq(c->state, SB_CLIENT_DOOMED);
    cr_assert_not(reads(c));
    close(far);
}

/* SB-7.3.2-1: a line longer than max_input_buffer is reported to the
 * client's owner, which closes the client. */
Test(clients, overlong_line_is_reported_and_closes_the_client) {
    cfg.limits.max_input_buffer = 64;
    int far;
    sb_client *c = connect_client(&far);
    char line[200];
    memset(line, 'x', sizeof line - 1);
    line[sizeof line - 1] = '\0';
    say(far, line);
    sb_relay_verdict v = {SB_RELAY_OK, SB_WHY_NONE, 0};
    for (int i = 0; i < 8 && v.event == SB_RELAY_OK; i++)
        v = sb_relay_read(&d, &c->peer);
    cr_assert_eq(v.event, SB_RELAY_OVERFLOW);
    cr_assert_eq(c->state, SB_CLIENT_OPEN, "the relay leaves it to the owner");
    sb_clients_verdict(&d, c, v);
    cr_assert_eq(c->state, SB_CLIENT_DOOMED);
    close(far);
}

/* SB-7.3.1-1..3: a client whose line takes the worker's queue over its
 * cap is paused (not read) until the one writable path drains the queue. */
Test(clients, input_paused_while_the_worker_queue_is_over_its_cap) {
    sb_peer *wp = &d.workers[0].peer;
    wp->out.max = 16;
    int far;
    sb_client *c = connect_client(&far);
    say(far, REQUEST_1);
    sb_relay_read(&d, &c->peer);
    cr_assert_eq(c->peer.blocked_on, wp, "paused on the worker's queue");
    cr_assert_eq(wp->waiters, 1);
    cr_assert_gt(wp->full_since_ms, 0);
    cr_assert(timer_armed(wp, SB_TIMER_FULL));
    cr_assert_not(reads(c));
    cr_assert_eq(c->state, SB_CLIENT_OPEN, "paused is not a state: both kinds pause");

    cr_assert(sb_relay_write(&d, wp));
    cr_assert_str_eq(received(worker_stdin), REQUEST_1);
    cr_assert_null(c->peer.blocked_on, "resumed once the queue drained");
    cr_assert_eq(wp->full_since_ms, 0);
    cr_assert_not(timer_armed(wp, SB_TIMER_FULL));
    cr_assert(c->peer.queued, "its buffered lines are routed at the end of the round");
    cr_assert(reads(c));
    close(far);
}

/* A failed write to a worker's stdin: closed, and the worker no longer
 * takes messages; its supervision decides at the end of the round. */
Test(clients, failed_write_to_a_worker_loses_its_stdin) {
    signal(SIGPIPE, SIG_IGN); /* as the daemon does */
    sb_peer *wp = &d.workers[0].peer;
    close(worker_stdin);
    worker_stdin = -1;
    sb_relay_send(&d, wp, REQUEST_1, strlen(REQUEST_1), NULL);
    sb_relay_flush(&d);
    cr_assert_eq(wp->out_fd, -1);
    cr_assert_not(d.router.running[0]);
    cr_assert_eq(d.round.stdin_lost.count, 1);
    cr_assert_eq(d.round.stdin_lost.at[0], wp);
}

/* 6.1.2: a worker's answer goes to the client that sent the request, and
 * to no other. */
Test(clients, worker_answer_reaches_its_client_only) {
    int far_a, far_b;
    sb_client *a = connect_client(&far_a);
    connect_client(&far_b);
    say(far_a, REQUEST_1);
    sb_relay_read(&d, &a->peer);
    sb_relay_flush(&d);
    cr_assert_str_eq(received(worker_stdin), REQUEST_1);
    say(worker_stdout, ANSWER_1);
    sb_relay_verdict v = sb_relay_read(&d, &d.workers[0].peer);
    cr_assert_eq(v.event, SB_RELAY_OK);
    sb_relay_flush(&d);
    cr_assert_str_eq(received(far_a), ANSWER_1);
    cr_assert_str_eq(received(far_b), "");
    close(far_a);
    close(far_b);
}

/* SB-7.3.1: what a client does not take yet stays queued, in order, with
 * POLLOUT watched, and the one writable path writes the rest later. */
Test(clients, output_a_client_does_not_take_yet_stays_queued_and_watched) {
    int far;
    sb_client *c = connect_client(&far);
    int small = 4096;
    cr_assert_eq(setsockopt(c->peer.out_fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    cr_assert_eq(setsockopt(far, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
    say(far, REQUEST_1);
    sb_relay_read(&d, &c->peer);
    sb_relay_flush(&d);
    cr_assert_str_eq(received(worker_stdin), REQUEST_1);

    static char answer[512 * 1024]; /* more than the socketpair holds */
    int head = snprintf(answer, sizeof answer, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"");
    memset(answer + head, 'x', sizeof answer - (size_t)head - 3);
    memcpy(answer + sizeof answer - 3, "\"}\n", 3);
    sb_peer *wp = &d.workers[0].peer;
    size_t sent = 0;
    while (sent < sizeof answer) { /* 16 KiB at a time: the pipe never fills */
        size_t chunk = sizeof answer - sent < 16384 ? sizeof answer - sent : 16384;
        cr_assert_eq(write(worker_stdout, answer + sent, chunk), (ssize_t)chunk);
        sent += chunk;
        struct pollfd pfd = {.fd = wp->in_fd, .events = POLLIN};
        while (poll(&pfd, 1, 0) == 1)
            cr_assert_eq(sb_relay_read(&d, wp).event, SB_RELAY_OK);
    }
    sb_relay_flush(&d);
    cr_assert_gt(sb_outq_len(&c->peer.out), 0, "the socket took part of it");
    cr_assert(sb_loop_get(&d.loop, c->peer.out_fd) & POLLOUT);

    static char got[sizeof answer];
    size_t have = 0;
    for (int i = 0; i < 100000 && have < sizeof answer; i++) {
        ssize_t n = read(far, got + have, sizeof got - have);
        if (n > 0)
            have += (size_t)n;
        cr_assert(sb_relay_write(&d, &c->peer));
    }
    cr_assert_eq(have, sizeof answer);
    cr_assert(memcmp(got, answer, sizeof answer) == 0, "the bytes as the worker wrote them");
    cr_assert_eq(sb_outq_len(&c->peer.out), 0);
    cr_assert_not(sb_loop_get(&d.loop, c->peer.out_fd) & POLLOUT, "nothing left to write");
    close(far);
}
