/* In-flight requests: the table, and how each one progresses to its answer
 * (progress notifications, delay, waiting for the client's reply to a
 * server-to-client request, cancellation). Kept in arrival order, so when
 * several answers fall due at once they come out in that order.
 *
 * The table knows what every answer carries (the worker's identity, the
 * cancelled ids) and where it goes (the output queue), but not the worker:
 * an answer that asks the worker to exit ("then": "exit") is a verdict the
 * caller collects with mw_reqs_take_exit and acts on. */
#ifndef MW_REQ_H
#define MW_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "log.h"
#include "opts.h"
#include "out.h"

#define MW_NEVER INT64_MAX

typedef struct mw_req {
    char *id_raw;         /* the id token exactly as received */
    char *id_norm;        /* cJSON rendering of the id, to match cancellations */
    char *sid_raw;        /* sessionId token as received, or NULL */
    char *method_raw;     /* method token as received */
    char *params_raw;     /* params token as received, or NULL */
    bool cancelled_query; /* method "mock/cancelled" */

    /* Directives from params.mock (all strings owned). */
    char *reply_id; /* rendering of reply_id, or NULL */
    bool reply_session_set;
    char *reply_session; /* rendering, or NULL: omit sessionId */
    char *emit;          /* emit text, or NULL */
    size_t emit_len;
    long emit_repeat;
    bool then_exit, no_reply, cancellable;
    long big, split, split_pause_ms;
    long notify_total, notify_sent;
    int64_t notify_at, notify_interval_ns;
    char *srv_id;        /* "\"srv-N\"" when a request was sent to the client */
    bool waiting_client; /* its response has not arrived yet */
    char *client_reply;  /* the client's response line, trimmed */
    int64_t answer_at;   /* MW_NEVER: only a cancellation ends it */
} mw_req;

typedef struct mw_reqs {
    mw_req **v; /* owned, arrival order */
    size_t n, cap;
    mw_out *out;         /* borrowed: where answers go */
    const mw_log *log;   /* borrowed: `cancel` records */
    const mw_opts *opts; /* borrowed: --sleep-ms, --split, --split-pause-ms */
    char *worker_json;   /* owned: "\"3\"" or "null" (STDIO_BUS_WORKER_ID) */
    char *pool_json;     /* owned: STDIO_BUS_POOL_ID likewise */
    long pid;
    mc_buf cancelled; /* ids of cancelled requests, raw, comma-separated */
    bool exit_due;    /* an answer asked for "then": "exit" */
} mw_reqs;

/* Reads the worker's identity from the environment; out, log and opts are
 * borrowed for the table's lifetime. */
void mw_reqs_init(mw_reqs *t, mw_out *out, const mw_log *log, const mw_opts *opts);
void mw_reqs_fini(mw_reqs *t);
/* True once after an answer asked for "then": "exit": the caller then
 * terminates the worker with status 0. Advancing stops there meanwhile. */
bool mw_reqs_take_exit(mw_reqs *t);
/* A zeroed request (answer_at 0: due at once). Free with mw_req_free. */
mw_req *mw_req_new(void);
void mw_req_free(mw_req *r);

/* Takes ownership of r, appends it, and advances it at once (what is due
 * now is queued on the output). */
void mw_req_start(mw_reqs *t, mw_req *r, int64_t now);
/* Advances every request whose time has come; finished ones are freed.
 * Stops early once an answer asked the worker to exit. */
void mw_req_step_all(mw_reqs *t, int64_t now);
/* Earliest deadline among in-flight requests, or 0. */
int64_t mw_req_deadline(const mw_reqs *t);
/* Routes the client's response (id rendering id_norm, raw line) to the
 * request that sent "srv-N". Returns MC_OK or MC_ENOTFOUND. */
int mw_req_client_reply(mw_reqs *t, const char *id_norm, const char *line, size_t len, int64_t now);
/* Drops the oldest cancellable request whose id renders as id_norm and
 * records it. Returns MC_OK or MC_ENOTFOUND. */
int mw_req_cancel(mw_reqs *t, const char *id_norm);
/* At EOF: drops requests that can only end by an input that will never
 * come (a client reply, a cancellation). */
void mw_req_drop_unfinishable(mw_reqs *t);

#endif
