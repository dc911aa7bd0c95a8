/* The poll loop (see ref_loop.h). */
#include "ref_loop.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/diag.h"
#include "common/lines.h"
#include "common/sig.h"
#include "common/stdio.h"
#include "ref_recv.h"
#include "ref_rpc.h"
#include "ref_state.h"
#include "ref_status.h"
#include "ref_tools.h"

/* Stop reading stdin while this much output waits for a client that does
 * not read: the queue stays bounded. */
#define OUT_HIGH (1u << 20)

typedef struct loop {
    ref_state st;
    mc_lines in;     /* stdin */
    mc_stdio stdio;  /* stdin/stdout flags, the signal self-pipe */
    bool discarding; /* skipping the rest of an over-long line */
    const char *why; /* why input ended: data of the -32603 of drained calls */
    int status;
} loop;

/* Handles every complete line read; then enforces the line cap. */
static void cut_lines(loop *l) {
    const char *line;
    size_t n;
    while (mc_lines_next(&l->in, &line, &n)) {
        if (l->discarding)
            l->discarding = false; /* the over-long line ends here */
        else
            ref_recv_line(&l->st, line, n);
    }
    if (mc_lines_rest(&l->in, NULL) > REF_LOOP_MAX_LINE) {
        if (!l->discarding) {
            mc_diag_note("parse error: line longer than %u bytes", REF_LOOP_MAX_LINE);
            ref_rpc_parse_error(&l->st, "line too long");
        }
        l->discarding = true;
        mc_lines_clear(&l->in);
    }
}

/* Nothing more will be read. */
static void close_input(loop *l, const char *why) {
    l->st.closing = true;
    l->why = why;
}

static void read_input(loop *l) {
    ssize_t r = mc_lines_read(&l->in, STDIN_FILENO);
    if (r == 0)
        return;
    if (r > 0) {
        cut_lines(l);
        return;
    }
    if (r == MC_ERR) {
        mc_diag_note("stdin: %s", strerror(errno));
        l->status = REF_EXIT_IO;
    }
    /* SB-R-12: a last line without its newline is still a message. */
    const char *rest;
    size_t n = mc_lines_rest(&l->in, &rest);
    if (n && !l->discarding)
        ref_recv_line(&l->st, rest, n);
    mc_lines_clear(&l->in);
    mc_diag_debug("end of input");
    close_input(l, "input closed before the client answered");
}

static void on_signal(loop *l, int signo) {
    if (l->st.closing) {
        mc_diag_note("signal %d: already finishing", signo);
        return;
    }
    mc_diag_note("signal %d: finishing %zu request(s) in flight, then exiting", signo,
                 l->st.calls.n);
    size_t partial = mc_lines_rest(&l->in, NULL);
    if (partial)
        mc_diag_note("dropping %zu bytes of an unfinished line", partial);
    mc_lines_clear(&l->in);
    close_input(l, "shutting down before the client answered");
}

static int run(loop *l) {
    for (;;) {
        l->st.now = mc_clock_now();
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

        /* The timeout is rounded up so the loop does not wake just before
         * the next slow-call event. */
        int timeout = mc_clock_timeout_ms(ref_calls_deadline(&l->st.calls), l->st.now);
        bool want_in = !l->st.closing && pending < OUT_HIGH;
        mc_ready ready;
        rc = mc_stdio_wait(&l->stdio, want_in, pending > 0, timeout, &ready);
        if (rc == MC_EAGAIN)
            continue;
        if (rc < 0) {
            ref_tools_abandon(&l->st);
            return REF_EXIT_IO;
        }
        l->st.now = mc_clock_now();
        if (ready.sig) {
            int signo;
            while ((signo = mc_sig_next(l->stdio.sig_fd)) > 0)
                on_signal(l, signo);
        }
        if (ready.in && !l->st.closing)
            read_input(l);
    }
}

int ref_loop_run(void) {
    loop l;
    memset(&l, 0, sizeof l);
    ref_out_init(&l.st.out, STDOUT_FILENO);
    ref_calls_init(&l.st.calls);
    mc_lines_init(&l.in);
    l.status = REF_EXIT_OK;

    int status = REF_EXIT_IO;
    if (mc_stdio_open(&l.stdio) == MC_OK)
        status = run(&l);
    mc_stdio_close(&l.stdio);
    ref_calls_fini(&l.st.calls);
    ref_out_fini(&l.st.out);
    mc_lines_fini(&l.in);
    return status;
}
