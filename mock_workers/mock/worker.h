/* The worker: its state, start-up, termination and the mode's trigger.
 * What reads it and moves it on: the poll loop (loop.h), which hands each
 * input line to dispatch.h. */
#ifndef MW_WORKER_H
#define MW_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/lines.h"
#include "common/stdio.h"
#include "flood.h"
#include "log.h"
#include "opts.h"
#include "out.h"
#include "req.h"

typedef struct mw_worker mw_worker;

struct mw_worker {
    const mw_opts *opts; /* borrowed */
    mw_log log;
    mw_out out;
    mw_reqs reqs;
    mw_flood flood;
    mc_lines in;           /* stdin */
    mc_stdio stdio;        /* stdin/stdout flags, the signal self-pipe */
    long messages;         /* non-blank lines handled */
    unsigned long srv_seq; /* last "srv-N" used */
    bool triggered;        /* the mode's trigger has fired */
    bool stall_read;       /* no more lines are read or handled */
    bool eof;
    bool quit; /* leave the loop now with quit_status */
    int quit_status;
    bool pending; /* terminate once queued output is written */
    int pending_status;
    int pending_signo; /* 0: exit with pending_status */
    int64_t term_at;   /* --term-delay-ms: exit 0 then (0: none) */
    int64_t crash_at;  /* --crash-after-ms deadline (0: none) */
};

/* Sets up logging, pid file, signals and non-blocking stdio. Returns
 * MC_OK or MC_ERR after a diagnostic. argv is logged in the start record. */
int mw_worker_init(mw_worker *w, const mw_opts *o, int argc, char **argv);
void mw_worker_fini(mw_worker *w);
/* Exit with status (or die of signo when non-zero) once the output queued
 * so far is written; nothing new is read or produced meanwhile. The first
 * call wins. */
void mw_worker_terminate(mw_worker *w, int status, int signo);
/* Leave the poll loop now with status, whatever is still queued. The
 * first call wins. */
void mw_worker_quit(mw_worker *w, int status);
/* Terminates with status 0 if an answer asked for "then": "exit" since
 * the last call (mw_reqs_take_exit). */
void mw_worker_reqs_done(mw_worker *w);
/* Fires the mode's trigger (bad output, flood, spam) once. id_raw/sid_raw
 * are the first request's tokens (NULL at start). Returns true when the
 * trigger's output stands in for that request's answer. */
bool mw_worker_trigger(mw_worker *w, const char *id_raw, const char *sid_raw, int64_t now);

#endif
