/* In-flight requests and their answers (see req.h). */
#include "req.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/diag.h"
#include "common/status.h"
#include "log.h"

/* JSON string of an environment variable, or null. */
static char *env_json(const char *name) {
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

void mw_reqs_init(mw_reqs *t, mw_out *out, const mw_log *log, const mw_opts *opts) {
    memset(t, 0, sizeof *t);
    t->out = out;
    t->log = log;
    t->opts = opts;
    t->pid = (long)getpid();
    mc_buf_init(&t->cancelled);
    t->worker_json = env_json("STDIO_BUS_WORKER_ID");
    t->pool_json = env_json("STDIO_BUS_POOL_ID");
}

void mw_reqs_fini(mw_reqs *t) {
    for (size_t i = 0; i < t->n; i++)
        mw_req_free(t->v[i]);
    free(t->v);
    free(t->worker_json);
    free(t->pool_json);
    mc_buf_fini(&t->cancelled);
    memset(t, 0, sizeof *t);
}

bool mw_reqs_take_exit(mw_reqs *t) {
    bool due = t->exit_due;
    t->exit_due = false;
    return due;
}

mw_req *mw_req_new(void) {
    mw_req *r = mc_xmalloc(sizeof *r);
    memset(r, 0, sizeof *r);
    r->split = 1;
    return r;
}

void mw_req_free(mw_req *r) {
    if (!r)
        return;
    free(r->id_raw);
    free(r->id_norm);
    free(r->sid_raw);
    free(r->method_raw);
    free(r->params_raw);
    free(r->reply_id);
    free(r->reply_session);
    free(r->emit);
    free(r->srv_id);
    free(r->client_reply);
    free(r);
}

static void remove_at(mw_reqs *t, size_t i) {
    mw_req_free(t->v[i]);
    memmove(t->v + i, t->v + i + 1, (t->n - i - 1) * sizeof t->v[0]);
    t->n--;
}

static void progress(mw_reqs *t, mw_req *r) {
    mc_buf b;
    mc_buf_init(&b);
    mc_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
                    "\"params\":{\"progressToken\":");
    mc_buf_puts(&b, r->id_raw);
    mc_buf_printf(&b, ",\"progress\":%ld,\"total\":%ld}", r->notify_sent + 1, r->notify_total);
    if (r->sid_raw)
        mc_buf_printf(&b, ",\"sessionId\":%s", r->sid_raw);
    mc_buf_puts(&b, "}");
    mw_out_line(t->out, b.data, b.len);
    mc_buf_fini(&b);
}

/* The echo answer (README "echo"), with the directives that shape it. */
static void build_answer(const mw_reqs *t, const mw_req *r, mc_buf *b) {
    mc_buf_puts(b, "{\"jsonrpc\":\"2.0\",\"id\":");
    mc_buf_puts(b, r->reply_id ? r->reply_id : r->id_raw);
    mc_buf_puts(b, ",\"result\":{\"method\":");
    mc_buf_puts(b, r->method_raw);
    mc_buf_puts(b, ",\"params\":");
    mc_buf_puts(b, r->params_raw ? r->params_raw : "null");
    mc_buf_printf(b, ",\"worker\":%s,\"pool\":%s,\"pid\":%ld", t->worker_json, t->pool_json,
                  t->pid);
    if (r->cancelled_query) {
        mc_buf_puts(b, ",\"cancelled\":[");
        if (t->cancelled.len)
            mc_buf_append(b, t->cancelled.data, t->cancelled.len);
        mc_buf_puts(b, "]");
    }
    if (r->client_reply)
        mc_buf_printf(b, ",\"client_reply\":%s", r->client_reply);
    if (r->big > 0) {
        mc_buf_puts(b, ",\"pad\":\"");
        mc_buf_fill(b, 'x', (size_t)r->big);
        mc_buf_puts(b, "\"");
    }
    mc_buf_puts(b, "}");
    if (r->reply_session_set) {
        if (r->reply_session)
            mc_buf_printf(b, ",\"sessionId\":%s", r->reply_session);
    } else if (r->sid_raw) {
        mc_buf_printf(b, ",\"sessionId\":%s", r->sid_raw);
    }
    mc_buf_puts(b, "}");
}

static void answer(mw_reqs *t, mw_req *r) {
    const mw_opts *o = t->opts;
    if (o->sleep_ms > 0)
        mc_clock_sleep_ms(o->sleep_ms); /* a worker busy computing: nothing else runs */
    long pieces = r->split > 1 ? r->split : o->split;
    long pause_ms = r->split > 1 ? r->split_pause_ms : o->split_pause_ms;
    int64_t pause_ns = (int64_t)pause_ms * MC_NS_PER_MS;

    if (r->no_reply) {
        /* nothing */
    } else if (r->emit) {
        mc_buf b;
        mc_buf_init(&b);
        for (long i = 0; i < r->emit_repeat; i++)
            mc_buf_append(&b, r->emit, r->emit_len);
        mw_out_bytes(t->out, b.data ? b.data : "", b.len, pieces, pause_ns, false);
        mc_buf_fini(&b);
    } else {
        mc_buf b;
        mc_buf_init(&b);
        build_answer(t, r, &b);
        if (pieces > 1)
            mw_out_bytes(t->out, b.data, b.len, pieces, pause_ns, true);
        else
            mw_out_line(t->out, b.data, b.len);
        mc_buf_fini(&b);
    }
    if (r->then_exit)
        t->exit_due = true;
}

/* Queues what is due for r. Returns true once r is finished. */
static bool step(mw_reqs *t, mw_req *r, int64_t now) {
    while (r->notify_sent < r->notify_total && r->notify_at <= now) {
        progress(t, r);
        r->notify_sent++;
        r->notify_at += r->notify_interval_ns;
    }
    if (r->notify_sent < r->notify_total || r->waiting_client || r->answer_at > now)
        return false;
    answer(t, r);
    return true;
}

void mw_req_start(mw_reqs *t, mw_req *r, int64_t now) {
    if (step(t, r, now)) {
        mw_req_free(r);
        return;
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->v = mc_xrealloc(t->v, t->cap, sizeof *t->v);
    }
    t->v[t->n++] = r;
}

void mw_req_step_all(mw_reqs *t, int64_t now) {
    for (size_t i = 0; i < t->n && !t->exit_due;) {
        if (step(t, t->v[i], now))
            remove_at(t, i);
        else
            i++;
    }
}

int64_t mw_req_deadline(const mw_reqs *t) {
    int64_t d = 0;
    for (size_t i = 0; i < t->n; i++) {
        const mw_req *r = t->v[i];
        if (r->notify_sent < r->notify_total)
            d = mc_clock_earliest(d, r->notify_at);
        else if (!r->waiting_client && r->answer_at != MW_NEVER)
            d = mc_clock_earliest(d, r->answer_at ? r->answer_at : 1);
    }
    return d;
}

int mw_req_client_reply(mw_reqs *t, const char *id_norm, const char *line, size_t len,
                        int64_t now) {
    for (size_t i = 0; i < t->n; i++) {
        mw_req *r = t->v[i];
        if (!r->waiting_client || strcmp(r->srv_id, id_norm) != 0)
            continue;
        r->waiting_client = false;
        r->client_reply = mc_xstrndup(line, len);
        if (step(t, r, now))
            remove_at(t, i);
        return MC_OK;
    }
    return MC_ENOTFOUND;
}

int mw_req_cancel(mw_reqs *t, const char *id_norm) {
    for (size_t i = 0; i < t->n; i++) {
        mw_req *r = t->v[i];
        if (!r->cancellable || strcmp(r->id_norm, id_norm) != 0)
            continue;
        mw_log_record(t->log, "cancel", r->id_raw, strlen(r->id_raw));
        mc_diag_note("request %s cancelled, dropped without an answer", r->id_raw);
        if (t->cancelled.len)
            mc_buf_puts(&t->cancelled, ",");
        mc_buf_puts(&t->cancelled, r->id_raw);
        remove_at(t, i);
        return MC_OK;
    }
    return MC_ENOTFOUND;
}

void mw_req_drop_unfinishable(mw_reqs *t) {
    for (size_t i = 0; i < t->n;) {
        mw_req *r = t->v[i];
        if (r->waiting_client || r->answer_at == MW_NEVER) {
            mc_diag_note("stdin closed: dropping request %s, which can no longer finish",
                         r->id_raw);
            remove_at(t, i);
        } else {
            i++;
        }
    }
}
