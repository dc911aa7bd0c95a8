/* The worker's poll loop, start-up and termination (see worker.h). */
#include "worker.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/diag.h"
#include "common/sig.h"
#include "bad.h"
#include "dispatch.h"
#include "signals.h"
#include "spam.h"
#include "status.h"

/* JSON string of an environment variable, or null. */
static char *env_json(const char *name)
{
    const char *v = getenv(name);
    if (!v)
        return mc_xstrndup("null", 4);
    cJSON *s = cJSON_CreateString(v);
    char *p = s ? cJSON_PrintUnformatted(s) : NULL;
    char *copy = mc_xstrndup(p ? p : "null", p ? strlen(p) : 4);
    cJSON_free(p);
    cJSON_Delete(s);
    return copy;
}

static void log_start(const mw_worker *w, int argc, char **argv)
{
    mc_buf b;
    mc_buf_init(&b);
    for (int i = 0; i < argc; i++) {
        if (i)
            mc_buf_append(&b, " ", 1);
        mc_buf_puts(&b, argv[i]);
    }
    mw_log_record(&w->log, "start", b.data ? b.data : "", b.len);
    mc_buf_fini(&b);
}

int mw_worker_init(mw_worker *w, const mw_opts *o, int argc, char **argv)
{
    memset(w, 0, sizeof *w);
    w->opts = o;
    w->stdio = (mc_stdio)MC_STDIO_CLOSED;
    w->pid = (long)getpid();
    mc_lines_init(&w->in);
    mc_buf_init(&w->cancelled);
    mw_reqs_init(&w->reqs);
    mw_flood_init(&w->flood);
    w->worker_json = env_json("STDIO_BUS_WORKER_ID");
    w->pool_json = env_json("STDIO_BUS_POOL_ID");

    if (mw_log_open(&w->log, o->log_path, getenv("STDIO_BUS_WORKER_ID")) < 0) {
        mc_diag_note("cannot open log %s: %s", o->log_path, strerror(errno));
        return MC_ERR;
    }
    mw_out_init(&w->out, STDOUT_FILENO, &w->log, o->coalesce > 1 ? (size_t)o->coalesce : 0);
    if (o->pidfile && mw_log_pidfile(o->pidfile) < 0) {
        mc_diag_note("cannot append to pid file %s: %s", o->pidfile, strerror(errno));
        return MC_ERR;
    }
    log_start(w, argc, argv);

    /* SEGV/ABRT on request must not leave core files behind. */
    struct rlimit nocore = { 0, 0 };
    setrlimit(RLIMIT_CORE, &nocore);

    return mc_stdio_open(&w->stdio);
}

void mw_worker_fini(mw_worker *w)
{
    mc_stdio_close(&w->stdio);
    mw_out_fini(&w->out);
    mw_reqs_fini(&w->reqs);
    mw_flood_fini(&w->flood);
    mc_lines_fini(&w->in);
    mc_buf_fini(&w->cancelled);
    free(w->worker_json);
    free(w->pool_json);
    mw_log_close(&w->log);
}

void mw_worker_terminate(mw_worker *w, int status, int signo)
{
    if (w->pending)
        return;
    w->pending = true;
    w->pending_status = status;
    w->pending_signo = signo;
}

static void quit(mw_worker *w, int status)
{
    if (w->quit)
        return;
    w->quit = true;
    w->quit_status = status;
}

bool mw_worker_trigger(mw_worker *w, const char *id_raw, const char *sid_raw, int64_t now)
{
    const mw_opts *o = w->opts;
    if (w->triggered)
        return false;
    w->triggered = true;
    switch (o->mode) {
    case MW_MODE_BAD: {
        bool replaces = mw_bad_emit(&w->out, o->bad, id_raw ? id_raw : "\"mock-bad\"", sid_raw,
                                    o->bytes);
        if (o->bad == MW_BAD_NONEWLINE)
            mw_worker_terminate(w, MW_EXIT_OK, 0);
        return replaces;
    }
    case MW_MODE_FLOOD: {
        char *sid = NULL;
        if (o->session) {
            cJSON *s = cJSON_CreateString(o->session);
            sid = s ? cJSON_PrintUnformatted(s) : NULL;
            cJSON_Delete(s);
        }
        mw_flood_start(&w->flood, o->rate, o->count, sid ? sid : sid_raw, now);
        cJSON_free(sid);
        return false;
    }
    case MW_MODE_SPAM:
        mw_spam_write(o->spam_bytes);
        return false;
    default:
        return false;
    }
}

/* Handles the complete lines in w->in, stopping as soon as the worker
 * must not read further (terminating, stalled): lines already buffered
 * then stay unhandled, so what the mock does never depends on how the
 * input happened to be chunked. */
static void handle_lines(mw_worker *w)
{
    const char *line;
    size_t n;
    while (!w->pending && !w->quit && !w->stall_read && mc_lines_next(&w->in, &line, &n)) {
        mw_log_record(&w->log, "in", line, n);
        mw_dispatch_line(w, line, n, mc_clock_now());
    }
}

static void on_eof(mw_worker *w)
{
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
    mw_req_drop_unfinishable(w);
    mw_out_release(&w->out);
}

static void read_input(mw_worker *w)
{
    ssize_t r = mc_lines_read(&w->in, STDIN_FILENO);
    if (r == MC_ERR) {
        mc_diag_note("read from stdin: %s", strerror(errno));
        quit(w, MW_EXIT_IO);
    } else if (r == MC_EOF) {
        on_eof(w);
    } else if (r > 0) {
        handle_lines(w);
    }
}

static void on_signals(mw_worker *w, int64_t now)
{
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
            quit(w, MW_EXIT_OK);
        }
    }
}

/* Carries out a terminate once the output queued before it is written. */
static void finish_pending(mw_worker *w)
{
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
    quit(w, w->pending_status);
}

/* EOF drain: exit 0 once every in-flight answer is out. */
static bool drained(const mw_worker *w)
{
    return w->eof && !w->opts->eof_stay && w->reqs.n == 0 && mw_out_queued(&w->out) == 0;
}

static int64_t next_deadline(const mw_worker *w, int64_t now)
{
    int64_t d = mw_out_deadline(&w->out, now);
    d = mc_clock_earliest(d, w->term_at);
    if (!w->pending) {
        d = mc_clock_earliest(d, mw_req_deadline(w));
        d = mc_clock_earliest(d, mw_flood_deadline(&w->flood, &w->out, now));
        d = mc_clock_earliest(d, w->crash_at);
    }
    return d;
}

int mw_worker_run(mw_worker *w)
{
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
            mw_req_step_all(w, now);
            mw_flood_tick(&w->flood, &w->out, now);
            if (w->crash_at && now >= w->crash_at) {
                w->crash_at = 0;
                mw_worker_terminate(w, o->exit_status, o->signo);
            }
        }
        if (w->term_at && now >= w->term_at)
            quit(w, MW_EXIT_OK);
        int rc = mw_out_write(&w->out, now);
        if (rc < 0) {
            mc_diag_note("stdout: %s", rc == MC_EOF ? "reader gone (EPIPE)" : strerror(errno));
            quit(w, MW_EXIT_IO);
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
        int waited = mc_stdio_wait(&w->stdio, want_in, mw_out_wants_pollout(&w->out, now),
                                   timeout, &ready);
        if (waited == MC_EAGAIN)
            continue;
        if (waited < 0) {
            quit(w, MW_EXIT_IO);
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
