/* The worker's poll loop (see loop.h). */
#include "loop.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/diag.h"
#include "common/lines.h"
#include "common/sig.h"
#include "common/stdio.h"
#include "dispatch.h"
#include "flood.h"
#include "log.h"
#include "out.h"
#include "req.h"
#include "signals.h"
#include "status.h"

/* Handles the complete lines in w->in, stopping as soon as the worker
 * must not read further (terminating, stalled): lines already buffered
 * then stay unhandled, so what the mock does never depends on how the
 * input happened to be chunked. */
static void handle_lines(mw_worker *w) {
    const char *line;
    size_t n;
    while (!w->pending && !w->quit && !w->stall_read && mc_lines_next(&w->in, &line, &n)) {
        mw_log_record(&w->log, "in", line, n);
        mw_dispatch_line(w, line, n, mc_clock_now());
    }
}

static void on_eof(mw_worker *w) {
    w->eof = true;
    /* A last line without newline still counts as a line. */
    const char *rest;
    size_t n = mc_lines_rest(&w->in, &rest);
    if (n > 0 && !w->pending && !w->quit && !w->stall_read) {
        mw_log_record(&w->log, "in", rest, n);
        mw_dispatch_line(w, rest, n, mc_clock_now());
        mc_lines_clear(&w->in);
    }
    if (w->opts->eof_stay)
        return;
    mw_flood_stop(&w->flood);
    mw_req_drop_unfinishable(&w->reqs);
    mw_out_release(&w->out);
}

static void read_input(mw_worker *w) {
    ssize_t r = mc_lines_read(&w->in, STDIN_FILENO);
    if (r == MC_ERR) {
        mc_diag_note("read from stdin: %s", strerror(errno));
        mw_worker_quit(w, MW_EXIT_IO);
    } else if (r == MC_EOF) {
        on_eof(w);
    } else if (r > 0) {
        handle_lines(w);
    }
}

static void on_signals(mw_worker *w, int64_t now) {
    int signo;
    while ((signo = mc_sig_next(w->stdio.sig_fd)) > 0) {
        const char *name = mw_signals_name(signo);
        mw_log_record(&w->log, "signal", name, strlen(name));
        if (signo == SIGTERM && w->opts->ignore_sigterm) {
            mc_diag_note("SIGTERM ignored (--ignore-sigterm)");
            continue;
        }
        if (signo == SIGTERM && w->opts->die_on_sigterm) {
            /* SB-W-11 broken on purpose: the default action, death by the signal */
            mc_diag_note("dying of SIGTERM (--die-on-sigterm)");
            signal(SIGTERM, SIG_DFL);
            raise(SIGTERM);
        }
        if (w->opts->term_delay_ms > 0) {
            if (!w->term_at)
                w->term_at = now + (int64_t)w->opts->term_delay_ms * MC_NS_PER_MS;
        } else {
            mw_worker_quit(w, MW_EXIT_OK);
        }
    }
}

/* Carries out a terminate once the output queued before it is written. */
static void finish_pending(mw_worker *w) {
    mw_out_release(&w->out);
    if (mw_out_queued(&w->out) > 0)
        return;
    if (w->pending_signo) {
        const char *name = mw_signals_name(w->pending_signo);
        mw_log_record(&w->log, "raise", name, strlen(name));
        w->pending = false; /* TERM/INT come back through the self-pipe */
        mw_signals_raise(w->pending_signo);
        return;
    }
    mw_worker_quit(w, w->pending_status);
}

/* EOF drain: exit 0 once every in-flight answer is out. */
static bool drained(const mw_worker *w) {
    return w->eof && !w->opts->eof_stay && w->reqs.n == 0 && mw_out_queued(&w->out) == 0;
}

static int64_t next_deadline(const mw_worker *w, int64_t now) {
    int64_t d = mw_out_deadline(&w->out, now);
    d = mc_clock_earliest(d, w->term_at);
    if (!w->pending) {
        d = mc_clock_earliest(d, mw_req_deadline(&w->reqs));
        d = mc_clock_earliest(d, mw_flood_deadline(&w->flood, &w->out, now));
        d = mc_clock_earliest(d, w->crash_at);
    }
    return d;
}

int mw_loop_run(mw_worker *w) {
    const mw_opts *o = w->opts;
    int64_t now = mc_clock_now();

    if (o->mode == MW_MODE_CRASH) {
        if (o->crash_after_ms == 0)
            mw_worker_terminate(w, o->exit_status, o->signo);
        else
            w->crash_at = now + (int64_t)o->crash_after_ms * MC_NS_PER_MS;
    }
    if (o->stall != MW_STALL_NONE && o->stall_after == 0) {
        if (o->stall == MW_STALL_READ)
            w->stall_read = true;
        else
            mw_out_stall(&w->out);
    }
    if (o->trigger_start && !w->pending)
        mw_worker_trigger(w, NULL, NULL, now);

    while (!w->quit) {
        now = mc_clock_now();
        if (!w->pending) {
            mw_req_step_all(&w->reqs, now);
            mw_worker_reqs_done(w);
            mw_flood_tick(&w->flood, &w->out, now);
            if (w->crash_at && now >= w->crash_at) {
                w->crash_at = 0;
                mw_worker_terminate(w, o->exit_status, o->signo);
            }
        }
        if (w->term_at && now >= w->term_at)
            mw_worker_quit(w, MW_EXIT_OK);
        int rc = mw_out_write(&w->out, now);
        if (rc < 0) {
            mc_diag_note("stdout: %s", rc == MC_EOF ? "reader gone (EPIPE)" : strerror(errno));
            mw_worker_quit(w, MW_EXIT_IO);
        }
        if (!w->pending && !w->quit && drained(w))
            mw_worker_terminate(w, MW_EXIT_OK, 0);
        if (w->pending && !w->quit)
            finish_pending(w);
        if (w->quit)
            break;

        bool want_in = !w->eof && !w->stall_read && !w->pending;
        int timeout = mc_clock_timeout_ms(next_deadline(w, now), now);
        mc_ready ready;
        int waited =
            mc_stdio_wait(&w->stdio, want_in, mw_out_wants_pollout(&w->out, now), timeout, &ready);
        if (waited == MC_EAGAIN)
            continue;
        if (waited < 0) {
            mw_worker_quit(w, MW_EXIT_IO);
            break;
        }
        now = mc_clock_now();
        if (ready.sig)
            on_signals(w, now);
        if (ready.in && !w->quit)
            read_input(w);
    }
    char status[16];
    int len = snprintf(status, sizeof status, "%d", w->quit_status);
    mw_log_record(&w->log, "exit", status, (size_t)len);
    return w->quit_status;
}
