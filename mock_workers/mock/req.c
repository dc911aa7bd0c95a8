/* In-flight requests and their answers (see req.h). */
#include "req.h"

#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/diag.h"
#include "log.h"
#include "status.h"
#include "worker.h"

void mw_reqs_init(mw_reqs *t)
{
    memset(t, 0, sizeof *t);
}

void mw_reqs_fini(mw_reqs *t)
{
    for (size_t i = 0; i < t->n; i++)
        mw_req_free(t->v[i]);
    free(t->v);
    memset(t, 0, sizeof *t);
}

mw_req *mw_req_new(void)
{
    mw_req *r = mc_xmalloc(sizeof *r);
    memset(r, 0, sizeof *r);
    r->split = 1;
    return r;
}

void mw_req_free(mw_req *r)
{
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

static void remove_at(mw_reqs *t, size_t i)
{
    mw_req_free(t->v[i]);
    memmove(t->v + i, t->v + i + 1, (t->n - i - 1) * sizeof t->v[0]);
    t->n--;
}

static void progress(mw_worker *w, mw_req *r)
{
    mc_buf b;
    mc_buf_init(&b);
    mc_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
                    "\"params\":{\"progressToken\":");
    mc_buf_puts(&b, r->id_raw);
    mc_buf_printf(&b, ",\"progress\":%ld,\"total\":%ld}", r->notify_sent + 1, r->notify_total);
    if (r->sid_raw)
        mc_buf_printf(&b, ",\"sessionId\":%s", r->sid_raw);
    mc_buf_puts(&b, "}");
    mw_out_line(&w->out, b.data, b.len);
    mc_buf_fini(&b);
}

/* The echo answer (README "echo"), with the directives that shape it. */
static void build_answer(const mw_worker *w, const mw_req *r, mc_buf *b)
{
    mc_buf_puts(b, "{\"jsonrpc\":\"2.0\",\"id\":");
    mc_buf_puts(b, r->reply_id ? r->reply_id : r->id_raw);
    mc_buf_puts(b, ",\"result\":{\"method\":");
    mc_buf_puts(b, r->method_raw);
    mc_buf_puts(b, ",\"params\":");
    mc_buf_puts(b, r->params_raw ? r->params_raw : "null");
    mc_buf_printf(b, ",\"worker\":%s,\"pool\":%s,\"pid\":%ld", w->worker_json, w->pool_json,
                  w->pid);
    if (r->cancelled_query) {
        mc_buf_puts(b, ",\"cancelled\":[");
        if (w->cancelled.len)
            mc_buf_append(b, w->cancelled.data, w->cancelled.len);
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

static void answer(mw_worker *w, mw_req *r)
{
    const mw_opts *o = w->opts;
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
        mw_out_bytes(&w->out, b.data ? b.data : "", b.len, pieces, pause_ns, false);
        mc_buf_fini(&b);
    } else {
        mc_buf b;
        mc_buf_init(&b);
        build_answer(w, r, &b);
        if (pieces > 1)
            mw_out_bytes(&w->out, b.data, b.len, pieces, pause_ns, true);
        else
            mw_out_line(&w->out, b.data, b.len);
        mc_buf_fini(&b);
    }
    if (r->then_exit)
        mw_worker_terminate(w, MW_EXIT_OK, 0);
}

/* Queues what is due for r. Returns true once r is finished. */
static bool step(mw_worker *w, mw_req *r, int64_t now)
{
    while (r->notify_sent < r->notify_total && r->notify_at <= now) {
        progress(w, r);
        r->notify_sent++;
        r->notify_at += r->notify_interval_ns;
    }
    if (r->notify_sent < r->notify_total || r->waiting_client || r->answer_at > now)
        return false;
    answer(w, r);
    return true;
}

void mw_req_start(mw_worker *w, mw_req *r, int64_t now)
{
    mw_reqs *t = &w->reqs;
    if (step(w, r, now)) {
        mw_req_free(r);
        return;
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->v = mc_xrealloc(t->v, t->cap, sizeof *t->v);
    }
    t->v[t->n++] = r;
}

void mw_req_step_all(mw_worker *w, int64_t now)
{
    mw_reqs *t = &w->reqs;
    for (size_t i = 0; i < t->n && !w->pending && !w->quit;) {
        if (step(w, t->v[i], now))
            remove_at(t, i);
        else
            i++;
    }
}

int64_t mw_req_deadline(const mw_worker *w)
{
    int64_t d = 0;
    for (size_t i = 0; i < w->reqs.n; i++) {
        const mw_req *r = w->reqs.v[i];
        if (r->notify_sent < r->notify_total)
            d = mc_clock_earliest(d, r->notify_at);
        else if (!r->waiting_client && r->answer_at != MW_NEVER)
            d = mc_clock_earliest(d, r->answer_at ? r->answer_at : 1);
    }
    return d;
}

int mw_req_client_reply(mw_worker *w, const char *id_norm, const char *line, size_t len,
                        int64_t now)
{
    mw_reqs *t = &w->reqs;
    for (size_t i = 0; i < t->n; i++) {
        mw_req *r = t->v[i];
        if (!r->waiting_client || strcmp(r->srv_id, id_norm) != 0)
            continue;
        r->waiting_client = false;
        r->client_reply = mc_xstrndup(line, len);
        if (step(w, r, now))
            remove_at(t, i);
        return MC_OK;
    }
    return MC_ENOTFOUND;
}

int mw_req_cancel(mw_worker *w, const char *id_norm)
{
    mw_reqs *t = &w->reqs;
    for (size_t i = 0; i < t->n; i++) {
        mw_req *r = t->v[i];
        if (!r->cancellable || strcmp(r->id_norm, id_norm) != 0)
            continue;
        mw_log_record(&w->log, "cancel", r->id_raw, strlen(r->id_raw));
        mc_diag_note("request %s cancelled, dropped without an answer", r->id_raw);
        if (w->cancelled.len)
            mc_buf_puts(&w->cancelled, ",");
        mc_buf_puts(&w->cancelled, r->id_raw);
        remove_at(t, i);
        return MC_OK;
    }
    return MC_ENOTFOUND;
}

void mw_req_drop_unfinishable(mw_worker *w)
{
    mw_reqs *t = &w->reqs;
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
