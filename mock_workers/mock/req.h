/* In-flight requests: the table, and how each one progresses to its answer
 * (progress notifications, delay, waiting for the client's reply to a
 * server-to-client request, cancellation). Kept in arrival order, so when
 * several answers fall due at once they come out in that order. */
#ifndef MW_REQ_H
#define MW_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MW_NEVER INT64_MAX

typedef struct mw_worker mw_worker;

typedef struct mw_req {
    char *id_raw;      /* the id token exactly as received */
    char *id_norm;     /* cJSON rendering of the id, to match cancellations */
    char *sid_raw;     /* sessionId token as received, or NULL */
    char *method_raw;  /* method token as received */
    char *params_raw;  /* params token as received, or NULL */
    bool cancelled_query; /* method "mock/cancelled" */

    /* Directives from params.mock (all strings owned). */
    char *reply_id;        /* rendering of reply_id, or NULL */
    bool reply_session_set;
    char *reply_session;   /* rendering, or NULL: omit sessionId */
    char *emit;            /* emit text, or NULL */
    size_t emit_len;
    long emit_repeat;
    bool then_exit, no_reply, cancellable;
    long big, split, split_pause_ms;
    long notify_total, notify_sent;
    int64_t notify_at, notify_interval_ns;
    char *srv_id;          /* "\"srv-N\"" when a request was sent to the client */
    bool waiting_client;   /* its response has not arrived yet */
    char *client_reply;    /* the client's response line, trimmed */
    int64_t answer_at;     /* MW_NEVER: only a cancellation ends it */
} mw_req;

typedef struct mw_reqs {
    mw_req **v; /* owned, arrival order */
    size_t n, cap;
} mw_reqs;

void mw_reqs_init(mw_reqs *t);
void mw_reqs_fini(mw_reqs *t);
/* A zeroed request (answer_at 0: due at once). Free with mw_req_free. */
mw_req *mw_req_new(void);
void mw_req_free(mw_req *r);

/* Takes ownership of r, appends it, and advances it at once (what is due
 * now is queued on the worker's output). */
void mw_req_start(mw_worker *w, mw_req *r, int64_t now);
/* Advances every request whose time has come; finished ones are freed.
 * Stops early once the worker is terminating. */
void mw_req_step_all(mw_worker *w, int64_t now);
/* Earliest deadline among in-flight requests, or 0. */
int64_t mw_req_deadline(const mw_worker *w);
/* Routes the client's response (id rendering id_norm, raw line) to the
 * request that sent "srv-N". Returns MC_OK or MC_ENOTFOUND. */
int mw_req_client_reply(mw_worker *w, const char *id_norm, const char *line, size_t len,
                        int64_t now);
/* Drops the oldest cancellable request whose id renders as id_norm and
 * records it. Returns MC_OK or MC_ENOTFOUND. */
int mw_req_cancel(mw_worker *w, const char *id_norm);
/* At EOF: drops requests that can only end by an input that will never
 * come (a client reply, a cancellation). */
void mw_req_drop_unfinishable(mw_worker *w);

#endif
