/* Unit tests for the output queue (src/base/outq.c; spec 7.3.1). The fd is a
 * non-blocking pipe shrunk to one page with F_SETPIPE_SZ, so a short write
 * happens on demand and never depends on timing. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "outq.h"
#include "status.h"

static sb_outq q;
static int rd = -1, wr = -1;
static size_t pipe_size;

static void open_pipe(void) {
    int fds[2];
    cr_assert_eq(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
    rd = fds[0];
    wr = fds[1];
    int size = fcntl(wr, F_SETPIPE_SZ, 4096);
    cr_assert_gt(size, 0, "F_SETPIPE_SZ: %s", strerror(errno));
    pipe_size = (size_t)size;
    /* EPIPE must come back as an error, not kill the test. */
    signal(SIGPIPE, SIG_IGN);
}

static void close_fds(void) {
    sb_outq_fini(&q);
    if (rd >= 0)
        close(rd);
    if (wr >= 0)
        close(wr);
    rd = wr = -1;
}

TestSuite(outq, .init = open_pipe, .fini = close_fds);

/* Bytes the pipe holds and nobody has read yet. */
static size_t in_pipe(void) {
    int n = 0;
    cr_assert_eq(ioctl(rd, FIONREAD, &n), 0);
    return (size_t)n;
}

/* Reads everything the pipe holds now into buf; returns how much. */
static size_t drain(char *buf, size_t size) {
    size_t got = 0;
    for (;;) {
        ssize_t n = read(rd, buf + got, size - got);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        cr_assert(n < 0 && errno == EAGAIN, "read: %zd (%s)", n, strerror(errno));
        return got;
    }
}

static void fill_pattern(char *buf, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)('a' + (i * 7 + seed) % 26);
}

Test(outq, eager_write_to_an_idle_fd_queues_nothing) {
    sb_outq_init(&q, 1024);
    cr_assert_eq(sb_outq_send(&q, wr, "hello\n", 6), STDIO_BUS_OK);
    cr_assert_eq(sb_outq_len(&q), 0);
    cr_assert_null(q.data, "an eager write must not allocate");
    char buf[16];
    cr_assert_eq(drain(buf, sizeof buf), 6);
    cr_assert(memcmp(buf, "hello\n", 6) == 0);
}

Test(outq, partial_write_queues_the_rest) {
    static char msg[10000];
    fill_pattern(msg, sizeof msg, 1);
    sb_outq_init(&q, 1 << 20);
    cr_assert_eq(sb_outq_send(&q, wr, msg, sizeof msg), STDIO_BUS_EAGAIN);
    size_t written = in_pipe();
    cr_assert_eq(written, pipe_size, "the eager write did not fill the pipe");
    cr_assert_eq(sb_outq_len(&q) + written, sizeof msg);
    /* What is queued is exactly the unwritten tail. */
    cr_assert(memcmp(q.data + q.head, msg + written, sb_outq_len(&q)) == 0);
}

Test(outq, queued_bytes_keep_their_order_across_sends_and_flushes) {
    /* Several messages, sent while earlier ones are still queued, must come
     * out of the pipe as one stream in the order they were sent. */
    static char sent[64 * 1024], got[64 * 1024];
    size_t sent_len = 0, got_len = 0;
    sb_outq_init(&q, 1 << 20);
    const size_t sizes[] = {3000, 6000, 1, 4096, 700, 9000, 12, 5000, 4095, 8000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        fill_pattern(sent + sent_len, sizes[i], (unsigned)i);
        int rc = sb_outq_send(&q, wr, sent + sent_len, sizes[i]);
        cr_assert(rc == STDIO_BUS_OK || rc == STDIO_BUS_EAGAIN, "send %zu: rc %d", i, rc);
        cr_assert_eq(rc == STDIO_BUS_EAGAIN, sb_outq_len(&q) > 0, "send %zu", i);
        sent_len += sizes[i];
        /* Read some of it every other send, so the queue both grows and
         * gets written from its middle. */
        if (i % 2)
            got_len += drain(got + got_len, sizeof got - got_len);
    }
    /* Drain the rest: read what the pipe holds, flush, until empty. */
    for (int rounds = 0; sb_outq_len(&q) > 0; rounds++) {
        cr_assert_lt(rounds, 1000, "the queue does not drain");
        got_len += drain(got + got_len, sizeof got - got_len);
        int rc = sb_outq_flush(&q, wr);
        cr_assert(rc == STDIO_BUS_OK || rc == STDIO_BUS_EAGAIN, "flush: rc %d", rc);
        cr_assert_eq(rc == STDIO_BUS_EAGAIN, sb_outq_len(&q) > 0);
    }
    got_len += drain(got + got_len, sizeof got - got_len);
    cr_assert_eq(got_len, sent_len);
    cr_assert(memcmp(got, sent, sent_len) == 0, "bytes reordered or corrupted");
}

Test(outq, flush_of_an_empty_queue_is_ok) {
    sb_outq_init(&q, 10);
    cr_assert_eq(sb_outq_flush(&q, wr), STDIO_BUS_OK);
    cr_assert_eq(in_pipe(), 0);
}

Test(outq, flush_to_a_full_pipe_is_eagain_and_keeps_everything) {
    static char fill[8192];
    sb_outq_init(&q, 1 << 20);
    cr_assert_eq(sb_outq_send(&q, wr, fill, sizeof fill), STDIO_BUS_EAGAIN);
    size_t queued = sb_outq_len(&q);
    cr_assert_eq(sb_outq_flush(&q, wr), STDIO_BUS_EAGAIN);
    cr_assert_eq(sb_outq_len(&q), queued);
}

Test(outq, storage_is_kept_when_the_queue_empties_and_released_by_clear) {
    static char msg[9000], buf[16384];
    fill_pattern(msg, sizeof msg, 3);
    sb_outq_init(&q, 777);
    cr_assert_eq(sb_outq_send(&q, wr, msg, sizeof msg), STDIO_BUS_EAGAIN);
    cr_assert_not_null(q.data);
    for (int rounds = 0; sb_outq_len(&q) > 0; rounds++) {
        cr_assert_lt(rounds, 100);
        drain(buf, sizeof buf);
        sb_outq_flush(&q, wr);
    }
    /* a busy connection reuses its buffer: no allocation per message */
    cr_assert_not_null(q.data, "an emptied queue dropped its buffer");
    cr_assert_eq(q.head, 0);
    char *kept = q.data;
    cr_assert_eq(sb_outq_push(&q, "x\n", 2), STDIO_BUS_OK);
    cr_assert_eq(q.data, kept);
    sb_outq_clear(&q);
    cr_assert_null(q.data, "clear must release the storage");
    cr_assert_eq(q.cap, 0);
    cr_assert_eq(q.max, 777, "the cap must survive the release");
}

Test(outq, closed_reader_is_eof_on_send) {
    sb_outq_init(&q, 1024);
    close(rd);
    rd = -1;
    cr_assert_eq(sb_outq_send(&q, wr, "x\n", 2), STDIO_BUS_EOF);
}

Test(outq, closed_reader_is_eof_on_flush) {
    static char msg[8192];
    sb_outq_init(&q, 1 << 20);
    cr_assert_eq(sb_outq_send(&q, wr, msg, sizeof msg), STDIO_BUS_EAGAIN);
    close(rd);
    rd = -1;
    cr_assert_eq(sb_outq_flush(&q, wr), STDIO_BUS_EOF);
    /* Sending behind a queue to a gone reader reports it too. */
    cr_assert_eq(sb_outq_send(&q, wr, "y\n", 2), STDIO_BUS_EOF);
}

Test(outq, other_write_errors_are_err) {
    sb_outq_init(&q, 1024);
    cr_assert_eq(sb_outq_send(&q, -1, "x\n", 2), STDIO_BUS_ERR);
    cr_assert_eq(sb_outq_send(&q, rd, "x\n", 2), STDIO_BUS_ERR); /* the read end: EBADF */
}

Test(outq, over_flag_is_set_only_past_the_cap) {
    static char bytes[101];
    sb_outq_init(&q, 100);
    cr_assert_not(sb_outq_over(&q));
    cr_assert_eq(sb_outq_push(&q, bytes, 100), STDIO_BUS_OK);
    cr_assert_eq(sb_outq_len(&q), 100);
    cr_assert_not(sb_outq_over(&q), "at exactly the cap is not over it");
    cr_assert_eq(sb_outq_push(&q, bytes, 1), STDIO_BUS_OK);
    cr_assert(sb_outq_over(&q));
}

Test(outq, a_message_bigger_than_the_cap_is_queued_whole) {
    /* The cap is a backpressure threshold, not a hard stop. */
    static char msg[20000];
    fill_pattern(msg, sizeof msg, 5);
    sb_outq_init(&q, 1000);
    cr_assert_eq(sb_outq_send(&q, wr, msg, sizeof msg), STDIO_BUS_EAGAIN);
    cr_assert_eq(sb_outq_len(&q) + in_pipe(), sizeof msg);
    cr_assert(sb_outq_over(&q));
}

Test(outq, over_flag_clears_as_the_queue_drains) {
    static char msg[12000], buf[16384];
    sb_outq_init(&q, 5000);
    cr_assert_eq(sb_outq_send(&q, wr, msg, sizeof msg), STDIO_BUS_EAGAIN);
    cr_assert(sb_outq_over(&q));
    for (int rounds = 0; sb_outq_over(&q); rounds++) {
        cr_assert_lt(rounds, 100);
        drain(buf, sizeof buf);
        sb_outq_flush(&q, wr);
    }
    cr_assert_leq(sb_outq_len(&q), 5000);
}

Test(outq, push_reuses_the_written_prefix) {
    /* After a partial flush, pushing again must not lose or reorder the
     * unwritten bytes when the buffer compacts. */
    static char a[4096 + 100], b[5000], out[16384];
    fill_pattern(a, sizeof a, 7);
    fill_pattern(b, sizeof b, 11);
    sb_outq_init(&q, 1 << 20);
    cr_assert_eq(sb_outq_push(&q, a, sizeof a), STDIO_BUS_OK);
    cr_assert_eq(sb_outq_flush(&q, wr), STDIO_BUS_EAGAIN);
    cr_assert_gt(q.head, 0);
    size_t cap = q.cap;
    cr_assert_gt(q.head + sb_outq_len(&q) + sizeof b, cap, "b must not fit behind the tail");
    cr_assert_eq(sb_outq_push(&q, b, sizeof b), STDIO_BUS_OK);
    cr_assert_eq(q.cap, cap, "grew instead of reclaiming the written prefix");
    size_t got = 0;
    for (int rounds = 0; sb_outq_len(&q) > 0; rounds++) {
        cr_assert_lt(rounds, 100);
        got += drain(out + got, sizeof out - got);
        sb_outq_flush(&q, wr);
    }
    got += drain(out + got, sizeof out - got);
    cr_assert_eq(got, sizeof a + sizeof b);
    cr_assert(memcmp(out, a, sizeof a) == 0);
    cr_assert(memcmp(out + sizeof a, b, sizeof b) == 0);
}

Test(outq, clear_drops_everything_and_keeps_the_cap) {
    sb_outq_init(&q, 42);
    cr_assert_eq(sb_outq_push(&q, "abc", 3), STDIO_BUS_OK);
    sb_outq_clear(&q);
    cr_assert_eq(sb_outq_len(&q), 0);
    cr_assert_null(q.data);
    cr_assert_eq(q.max, 42);
    cr_assert_eq(sb_outq_flush(&q, wr), STDIO_BUS_OK);
    cr_assert_eq(in_pipe(), 0);
}
