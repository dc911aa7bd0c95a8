/* The worker's start-up, termination and trigger (see worker.h). */
#include "worker.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/diag.h"
#include "bad.h"
#include "child.h"
#include "spam.h"
#include "status.h"

static void log_start(const mw_worker *w, int argc, char **argv) {
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

int mw_worker_init(mw_worker *w, const mw_opts *o, int argc, char **argv) {
    memset(w, 0, sizeof *w);
    w->opts = o;
    w->stdio = (mc_stdio)MC_STDIO_CLOSED;
    mc_lines_init(&w->in);
    mw_reqs_init(&w->reqs, &w->out, &w->log, o);
    mw_flood_init(&w->flood);

    if (mw_log_open(&w->log, o->log_path, getenv("STDIO_BUS_WORKER_ID")) < 0) {
        mc_diag_note("cannot open log %s: %s", o->log_path, strerror(errno));
        return MC_ERR;
    }
    mw_out_init(&w->out, STDOUT_FILENO, &w->log, o->coalesce > 1 ? (size_t)o->coalesce : 0);

    /* SEGV/ABRT on request must not leave core files behind. */
    struct rlimit nocore = {0, 0};
    setrlimit(RLIMIT_CORE, &nocore);

    if (mc_stdio_open(&w->stdio) != MC_OK)
        return MC_ERR;
    /* Only now that signals go to our signalfd: a test that reads our pid or
     * our start record may signal us at once (--ignore-sigterm included). */
    if (o->pidfile && mw_log_pidfile(o->pidfile) < 0) {
        mc_diag_note("cannot append to pid file %s: %s", o->pidfile, strerror(errno));
        return MC_ERR;
    }
    log_start(w, argc, argv);
    if (mw_child_spawn(&w->log, o->child) < 0) {
        mc_diag_note("cannot start its --spawn-child helper: %s", strerror(errno));
        return MC_ERR;
    }
    return MC_OK;
}

void mw_worker_fini(mw_worker *w) {
    mc_stdio_close(&w->stdio);
    mw_out_fini(&w->out);
    mw_reqs_fini(&w->reqs);
    mw_flood_fini(&w->flood);
    mc_lines_fini(&w->in);
    mw_log_close(&w->log);
}

void mw_worker_terminate(mw_worker *w, int status, int signo) {
    if (w->pending)
        return;
    w->pending = true;
    w->pending_status = status;
    w->pending_signo = signo;
}

void mw_worker_quit(mw_worker *w, int status) {
    if (w->quit)
        return;
    w->quit = true;
    w->quit_status = status;
}

void mw_worker_reqs_done(mw_worker *w) {
    if (mw_reqs_take_exit(&w->reqs))
        mw_worker_terminate(w, MW_EXIT_OK, 0);
}

bool mw_worker_trigger(mw_worker *w, const char *id_raw, const char *sid_raw, int64_t now) {
    const mw_opts *o = w->opts;
    if (w->triggered)
        return false;
    w->triggered = true;
    switch (o->mode) {
    case MW_MODE_BAD: {
        bool replaces =
            mw_bad_emit(&w->out, o->bad, id_raw ? id_raw : "\"mock-bad\"", sid_raw, o->bytes);
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
