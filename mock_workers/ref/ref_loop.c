/* The poll loop (see ref_loop.h). */
#include "ref_loop.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/diag.h"
#include "common/sig.h"
#include "ref_rpc.h"
#include "ref_state.h"
#include "ref_status.h"
#include "ref_tools.h"

#define READ_CHUNK 65536
/* Stop reading stdin while this much output waits for a client that does
 * not read: the queue stays bounded. */
#define OUT_HIGH (1u << 20)

typedef struct loop {
    ref_state st;
    mc_buf in;         /* bytes read, not yet cut into lines */
    size_t scanned;     /* prefix of `in` known to hold no newline */
    bool discarding;    /* skipping the rest of an over-long line */
    const char *why;    /* why input ended: data of the -32603 of drained calls */
    int status;
    int sig_fd;
    int flags[2];       /* stdin/stdout file status flags to restore */
} loop;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int set_nonblocking(int fd, int *saved)
{
    int fl = fcntl(fd, F_GETFL);
    *saved = fl;
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return MC_ERR;
    return MC_OK;
}

/* Handles every complete line in the buffer; then enforces the line cap. */
static void cut_lines(loop *l)
{
    size_t start = 0;
    for (;;) {
        char *nl = memchr(l->in.data + l->scanned, '\n', l->in.len - l->scanned);
        if (!nl)
            break;
        size_t end = (size_t)(nl - l->in.data);
        if (l->discarding)
            l->discarding = false; /* the over-long line ends here */
        else
            ref_rpc_line(&l->st, l->in.data + start, end - start);
        start = end + 1;
        l->scanned = start;
    }
    mc_buf_consume(&l->in, start);
    l->scanned = l->in.len;
    if (l->in.len > REF_LOOP_MAX_LINE) {
        if (!l->discarding) {
            mc_diag_note("parse error: line longer than %u bytes", REF_LOOP_MAX_LINE);
            ref_rpc_parse_error(&l->st, "line too long");
        }
        l->discarding = true;
        mc_buf_clear(&l->in);
        l->scanned = 0;
    }
}

/* Nothing more will be read. */
static void close_input(loop *l, const char *why)
{
    l->st.closing = true;
    l->why = why;
}

static void read_input(loop *l)
{
    char chunk[READ_CHUNK];
    ssize_t r;
    do {
        r = read(STDIN_FILENO, chunk, sizeof chunk);
    } while (r < 0 && errno == EINTR);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (r > 0) {
        mc_buf_append(&l->in, chunk, (size_t)r);
        cut_lines(l);
        return;
    }
    if (r < 0) {
        mc_diag_note("stdin: %s", strerror(errno));
        l->status = REF_EXIT_IO;
    }
    /* SB-R-12: a last line without its newline is still a message. */
    if (l->in.len && !l->discarding)
        ref_rpc_line(&l->st, l->in.data, l->in.len);
    mc_buf_clear(&l->in);
    mc_diag_debug("end of input");
    close_input(l, "input closed before the client answered");
}

static void on_signal(loop *l, int signo)
{
    if (l->st.closing) {
        mc_diag_note("signal %d: already finishing", signo);
        return;
    }
    mc_diag_note("signal %d: finishing %zu request(s) in flight, then exiting", signo,
                 l->st.calls.n);
    if (l->in.len)
        mc_diag_note("dropping %zu bytes of an unfinished line", l->in.len);
    mc_buf_clear(&l->in);
    close_input(l, "shutting down before the client answered");
}

/* poll() timeout for the next slow-call event, rounded up so the loop
 * does not wake just before it. */
static int timeout_ms(const loop *l)
{
    int64_t due = ref_calls_deadline(&l->st.calls);
    if (due < 0)
        return -1;
    int64_t left = due - l->st.now;
    if (left <= 0)
        return 0;
    int64_t ms = (left + 999999) / 1000000;
    return ms > 60000 ? 60000 : (int)ms;
}

static int run(loop *l)
{
    for (;;) {
        l->st.now = now_ns();
        ref_tools_tick(&l->st);
        if (l->st.closing)
            ref_tools_drain(&l->st, l->why);
        int rc = ref_out_flush(&l->st.out);
        if (rc < 0) {
            mc_diag_note("stdout: %s; exiting", rc == MC_EOF ? "reader gone" : strerror(errno));
            ref_tools_abandon(&l->st);
            return REF_EXIT_IO;
        }
        size_t pending = ref_out_pending(&l->st.out);
        if (l->st.closing && l->st.calls.n == 0 && pending == 0)
            return l->status;

        struct pollfd pfd[3];
        nfds_t n = 0;
        pfd[n++] = (struct pollfd){ .fd = l->sig_fd, .events = POLLIN };
        int in_at = -1;
        if (!l->st.closing && pending < OUT_HIGH) {
            in_at = (int)n;
            pfd[n++] = (struct pollfd){ .fd = STDIN_FILENO, .events = POLLIN };
        }
        if (pending)
            pfd[n++] = (struct pollfd){ .fd = STDOUT_FILENO, .events = POLLOUT };
        if (poll(pfd, n, timeout_ms(l)) < 0) {
            if (errno == EINTR)
                continue;
            mc_diag_note("poll: %s", strerror(errno));
            ref_tools_abandon(&l->st);
            return REF_EXIT_IO;
        }
        l->st.now = now_ns();
        if (pfd[0].revents) {
            int signo;
            while ((signo = mc_sig_next(l->sig_fd)) > 0)
                on_signal(l, signo);
        }
        if (in_at >= 0 && pfd[in_at].revents && !l->st.closing)
            read_input(l);
    }
}

int ref_loop_run(void)
{
    loop l;
    memset(&l, 0, sizeof l);
    ref_out_init(&l.st.out, STDOUT_FILENO);
    ref_calls_init(&l.st.calls);
    mc_buf_init(&l.in);
    l.status = REF_EXIT_OK;
    l.flags[0] = l.flags[1] = -1;

    l.sig_fd = mc_sig_open();
    if (l.sig_fd < 0) {
        mc_diag_note("cannot set up signals: %s", strerror(errno));
        return REF_EXIT_IO;
    }
    int status;
    if (set_nonblocking(STDIN_FILENO, &l.flags[0]) < 0
        || set_nonblocking(STDOUT_FILENO, &l.flags[1]) < 0) {
        mc_diag_note("cannot make stdin/stdout non-blocking: %s", strerror(errno));
        status = REF_EXIT_IO;
    } else
        status = run(&l);

    /* The flags belong to open file descriptions we may share (a
     * terminal, a pipe the daemon keeps): put them back. */
    if (l.flags[0] >= 0)
        fcntl(STDIN_FILENO, F_SETFL, l.flags[0]);
    if (l.flags[1] >= 0)
        fcntl(STDOUT_FILENO, F_SETFL, l.flags[1]);
    mc_sig_close(l.sig_fd);
    ref_calls_fini(&l.st.calls);
    ref_out_fini(&l.st.out);
    mc_buf_fini(&l.in);
    return status;
}
