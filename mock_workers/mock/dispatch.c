/* Input classification and params.mock directives (see dispatch.h and
 * README.md). */
#include "dispatch.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/diag.h"
#include "out.h"
#include "raw.h"
#include "req.h"
#include "signals.h"
#include "status.h"
#include "worker.h"

#define BIG (1L << 30)

static bool is_blank(const char *p, size_t n) {
    return mw_raw_trim(p, n).n == 0;
}

/* Copy of the raw token of top-level member key, or NULL. */
static char *raw_copy(const char *line, size_t len, const char *key) {
    mw_span sp;
    if (mw_raw_field(line, len, key, &sp) != MC_OK)
        return NULL;
    return mc_xstrndup(sp.p, sp.n);
}

/* cJSON rendering of item, in memory from mc_xmalloc (free()). */
static char *render(const cJSON *item) {
    char *p = cJSON_PrintUnformatted(item);
    if (!p)
        return mc_xstrndup("null", 4);
    char *copy = mc_xstrndup(p, strlen(p));
    cJSON_free(p);
    return copy;
}

/* Integer directive clamped to [lo, hi]; dflt when absent or not a number. */
static long num(const cJSON *mock, const char *key, long dflt, long lo, long hi) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(mock, key);
    if (!cJSON_IsNumber(it))
        return dflt;
    double v = it->valuedouble;
    if (v < (double)lo)
        return lo;
    if (v > (double)hi)
        return hi;
    return (long)v;
}

static const cJSON *mock_of(const cJSON *msg) {
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    const cJSON *mock = cJSON_GetObjectItemCaseSensitive(params, "mock");
    if (mock && !cJSON_IsObject(mock)) {
        mc_diag_note("params.mock is not an object: ignored");
        return NULL;
    }
    return mock;
}

/* exit, signal and stall, which apply to notifications too. Returns true
 * when the message ends the worker (nothing else to do for it). */
static bool apply_actions(mw_worker *w, const cJSON *mock) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(mock, "exit");
    if (cJSON_IsNumber(it)) {
        mw_worker_terminate(w, (int)num(mock, "exit", 0, 0, 255), 0);
        return true;
    }
    it = cJSON_GetObjectItemCaseSensitive(mock, "signal");
    if (cJSON_IsString(it)) {
        int signo = mw_signals_parse(it->valuestring);
        if (signo > 0) {
            mw_worker_terminate(w, 0, signo);
            return true;
        }
        mc_diag_note("unknown signal '%s' in params.mock.signal: ignored", it->valuestring);
    }
    it = cJSON_GetObjectItemCaseSensitive(mock, "stall");
    if (cJSON_IsString(it)) {
        if (strcmp(it->valuestring, "read") == 0)
            w->stall_read = true; /* takes effect after this message */
        else if (strcmp(it->valuestring, "write") == 0)
            mw_out_stall(&w->out);
        else
            mc_diag_note("unknown stall '%s': ignored", it->valuestring);
    }
    return false;
}

/* emit/emit_repeat for a notification (requests go through req.c). */
static void emit_now(mw_worker *w, const cJSON *mock) {
    const cJSON *emit = cJSON_GetObjectItemCaseSensitive(mock, "emit");
    if (cJSON_IsString(emit)) {
        long repeat = num(mock, "emit_repeat", 1, 0, BIG);
        size_t n = strlen(emit->valuestring);
        mc_buf b;
        mc_buf_init(&b);
        for (long i = 0; i < repeat; i++)
            mc_buf_append(&b, emit->valuestring, n);
        mw_out_bytes(&w->out, b.data ? b.data : "", b.len, 1, 0, false);
        mc_buf_fini(&b);
    }
    const cJSON *then = cJSON_GetObjectItemCaseSensitive(mock, "then");
    if (cJSON_IsString(then) && strcmp(then->valuestring, "exit") == 0)
        mw_worker_terminate(w, MW_EXIT_OK, 0);
}

static void send_server_request(mw_worker *w, mw_req *r, const cJSON *spec) {
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(spec, "method");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(spec, "params");
    mc_buf b;
    mc_buf_init(&b);
    mc_buf_printf(&b, "\"srv-%lu\"", ++w->srv_seq);
    r->srv_id = mc_buf_take(&b, NULL);
    r->waiting_client = true;

    mc_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":", r->srv_id);
    char *m = method ? render(method) : mc_xstrndup("\"mock/request\"", 14);
    mc_buf_puts(&b, m);
    free(m);
    if (params) {
        char *p = render(params);
        mc_buf_printf(&b, ",\"params\":%s", p);
        free(p);
    }
    if (r->sid_raw)
        mc_buf_printf(&b, ",\"sessionId\":%s", r->sid_raw);
    mc_buf_puts(&b, "}");
    mw_out_line(&w->out, b.data, b.len);
    mc_buf_fini(&b);
}

static void directives(mw_worker *w, mw_req *r, const cJSON *mock, int64_t now) {
    const mw_opts *o = w->opts;
    const cJSON *it;
    long delay = num(mock, "delay_ms", o->delay_ms, 0, BIG);
    r->notify_total = num(mock, "notify", 0, 0, 1000000);
    r->notify_interval_ns = (int64_t)num(mock, "notify_interval_ms", 0, 0, BIG) * MC_NS_PER_MS;
    r->notify_at = now;

    it = cJSON_GetObjectItemCaseSensitive(mock, "emit");
    if (cJSON_IsString(it)) {
        r->emit_len = strlen(it->valuestring);
        r->emit = mc_xstrndup(it->valuestring, r->emit_len);
        r->emit_repeat = num(mock, "emit_repeat", 1, 0, BIG);
    }
    it = cJSON_GetObjectItemCaseSensitive(mock, "then");
    r->then_exit = cJSON_IsString(it) && strcmp(it->valuestring, "exit") == 0;
    it = cJSON_GetObjectItemCaseSensitive(mock, "reply_id");
    if (it)
        r->reply_id = render(it);
    it = cJSON_GetObjectItemCaseSensitive(mock, "reply_session");
    if (it) {
        r->reply_session_set = true;
        r->reply_session = cJSON_IsNull(it) ? NULL : render(it);
    }
    r->no_reply = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(mock, "no_reply"));
    r->big = num(mock, "big", 0, 0, BIG);
    r->split = num(mock, "split", 1, 1, 1L << 20);
    r->split_pause_ms = num(mock, "split_pause_ms", 0, 0, BIG);
    r->cancellable = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(mock, "cancellable"));

    /* A cancellable request without its own delay_ms never ends by itself. */
    bool own_delay = cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(mock, "delay_ms"));
    r->answer_at = r->cancellable && !own_delay ? MW_NEVER : now + (int64_t)delay * MC_NS_PER_MS;

    it = cJSON_GetObjectItemCaseSensitive(mock, "request");
    if (cJSON_IsObject(it))
        send_server_request(w, r, it);
}

static void handle_request(mw_worker *w, const cJSON *msg, const char *line, size_t len,
                           int64_t now) {
    const mw_opts *o = w->opts;
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
    mw_req *r = mw_req_new();
    r->id_raw = raw_copy(line, len, "id");
    r->id_norm = render(cJSON_GetObjectItemCaseSensitive(msg, "id"));
    r->sid_raw = raw_copy(line, len, "sessionId");
    r->method_raw = raw_copy(line, len, "method");
    r->params_raw = raw_copy(line, len, "params");
    r->cancelled_query = strcmp(method->valuestring, "mock/cancelled") == 0;
    if (!r->id_raw || !r->method_raw) { /* cJSON accepted what raw.c cannot read */
        mc_diag_note("cannot locate the raw id/method tokens: ignored");
        mw_req_free(r);
        return;
    }

    if (!w->triggered && !o->trigger_start && mw_worker_trigger(w, r->id_raw, r->sid_raw, now)) {
        mw_req_free(r); /* the trigger's output stands in for the answer */
        return;
    }
    const cJSON *mock = mock_of(msg);
    if (apply_actions(w, mock)) {
        mw_req_free(r);
        return;
    }
    directives(w, r, mock, now);
    mw_req_start(&w->reqs, r, now);
    mw_worker_reqs_done(w);
}

static void handle_notification(mw_worker *w, const cJSON *msg, const char *method) {
    if (strcmp(method, "notifications/cancelled") == 0) {
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
        const cJSON *rid = cJSON_GetObjectItemCaseSensitive(params, "requestId");
        if (!rid) {
            mc_diag_note("notifications/cancelled without params.requestId: ignored");
        } else {
            char *norm = render(rid);
            if (mw_req_cancel(&w->reqs, norm) != MC_OK)
                mc_diag_note("cancellation of %s matches no cancellable request: ignored", norm);
            free(norm);
        }
    }
    const cJSON *mock = mock_of(msg);
    if (mock && !apply_actions(w, mock))
        emit_now(w, mock);
}

static void handle_response(mw_worker *w, const cJSON *msg, const char *line, size_t len,
                            int64_t now) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    if (!id) {
        mc_diag_note("response without an id: ignored");
        return;
    }
    char *norm = render(id);
    mw_span sp = mw_raw_trim(line, len);
    if (mw_req_client_reply(&w->reqs, norm, sp.p, sp.n, now) != MC_OK)
        mc_diag_note("response to %s, which no request of mine is waiting for: recorded", norm);
    mw_worker_reqs_done(w);
    free(norm);
}

static bool only_ws(const char *p, const char *end) {
    return mw_raw_trim(p, (size_t)(end - p)).n == 0;
}

/* --strict-members: the first top-level member outside the JSON-RPC 2.0
 * envelope, or NULL. A strict schema validator (the MCP TypeScript SDK's)
 * drops such a message; behind the bus every sessionId is one (SB-W-12). */
static const char *foreign_member(const cJSON *msg) {
    static const char *const envelope[] = {"jsonrpc", "id", "method", "params", "result", "error"};
    for (const cJSON *it = msg->child; it; it = it->next) {
        bool known = false;
        for (size_t i = 0; i < sizeof envelope / sizeof envelope[0]; i++)
            known = known || strcmp(it->string, envelope[i]) == 0;
        if (!known)
            return it->string;
    }
    return NULL;
}

static void handle(mw_worker *w, const char *line, size_t len, int64_t now) {
    const char *end = NULL;
    cJSON *msg = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    if (!msg || !only_ws(end, line + len) || !cJSON_IsObject(msg)) {
        mc_diag_note("input line of %zu bytes is not a JSON object: ignored", len);
        cJSON_Delete(msg);
        return;
    }
    const char *foreign = w->opts->strict_members ? foreign_member(msg) : NULL;
    if (foreign) {
        mc_diag_note("member '%s' is not JSON-RPC: message dropped (--strict-members)", foreign);
        cJSON_Delete(msg);
        return;
    }
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    if (method) {
        if (!cJSON_IsString(method)) {
            mc_diag_note("method is not a string: ignored");
        } else if (w->opts->exit_on && strcmp(method->valuestring, w->opts->exit_on) == 0) {
            mw_worker_terminate(w, w->opts->exit_status, w->opts->signo);
        } else if (id) {
            handle_request(w, msg, line, len, now);
        } else {
            handle_notification(w, msg, method->valuestring);
        }
    } else if (cJSON_GetObjectItemCaseSensitive(msg, "result") ||
               cJSON_GetObjectItemCaseSensitive(msg, "error")) {
        handle_response(w, msg, line, len, now);
    } else {
        mc_diag_note("object with neither method nor result/error: ignored");
    }
    cJSON_Delete(msg);
}

void mw_dispatch_line(mw_worker *w, const char *line, size_t len, int64_t now) {
    const mw_opts *o = w->opts;
    if (is_blank(line, len))
        return;
    w->messages++;
    handle(w, line, len, now);
    if (o->after > 0 && w->messages == o->after)
        mw_worker_terminate(w, o->exit_status, o->signo);
    if (o->stall != MW_STALL_NONE && o->stall_after > 0 && w->messages == o->stall_after) {
        if (o->stall == MW_STALL_READ)
            w->stall_read = true;
        else
            mw_out_stall(&w->out);
    }
}
