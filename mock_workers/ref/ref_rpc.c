/* JSON-RPC 2.0 outcomes and batches (see ref_rpc.h). */
#include "ref_rpc.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/buf.h"
#include "common/diag.h"

struct ref_batch {
    size_t n;        /* messages in the batch */
    size_t waiting;  /* outcomes still owed, plus one while it is being read */
    mc_buf *answers; /* one per message; empty: no answer */
};

static const char *message_of(int code) {
    switch (code) {
    case REF_RPC_PARSE_ERROR:
        return "Parse error";
    case REF_RPC_INVALID_REQUEST:
        return "Invalid Request";
    case REF_RPC_METHOD_NOT_FOUND:
        return "Method not found";
    case REF_RPC_INVALID_PARAMS:
        return "Invalid params";
    default:
        return "Internal error";
    }
}

/* Appends s as a JSON string (cJSON escapes it; output stays one line). */
static void add_quoted(mc_buf *b, const char *s) {
    cJSON *str = cJSON_CreateString(s);
    char *text = str ? cJSON_PrintUnformatted(str) : NULL;
    if (!text)
        mc_diag_oom();
    mc_buf_puts(b, text);
    cJSON_free(text);
    cJSON_Delete(str);
}

/* Writes the batch's answer: an array of the answers it holds, or nothing
 * at all when it holds none (JSON-RPC 2.0 section 6; SB-J-13). */
static void batch_emit(ref_state *st, ref_batch *b) {
    mc_buf line;
    mc_buf_init(&line);
    for (size_t i = 0; i < b->n; i++) {
        if (!b->answers[i].len)
            continue;
        mc_buf_append(&line, line.len ? "," : "[", 1);
        mc_buf_append(&line, b->answers[i].data, b->answers[i].len);
    }
    if (line.len) {
        mc_buf_append(&line, "]", 1);
        ref_out_line(&st->out, line.data, line.len);
    }
    mc_buf_fini(&line);
    for (size_t i = 0; i < b->n; i++)
        mc_buf_fini(&b->answers[i]);
    free(b->answers);
    free(b);
}

static void batch_release(ref_state *st, ref_batch *b) {
    if (--b->waiting == 0)
        batch_emit(st, b);
}

/* The one outcome of the message at o: a line, or NULL for silence. */
static void settle(ref_state *st, const ref_origin *o, const char *line, size_t n) {
    if (!o->batch) {
        if (line)
            ref_out_line(&st->out, line, n);
        return;
    }
    if (line)
        mc_buf_append(&o->batch->answers[o->slot], line, n);
    batch_release(st, o->batch);
}

/* {"jsonrpc":"2.0","id":<id>,"<member>":<value>[,"sessionId":<sid>]} */
static void answer(ref_state *st, const ref_origin *o, const char *member, const char *value) {
    mc_buf b;
    mc_buf_init(&b);
    mc_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":");
    if (o->id.p)
        mc_buf_append(&b, o->id.p, o->id.n);
    else
        mc_buf_puts(&b, "null");
    mc_buf_printf(&b, ",\"%s\":", member);
    mc_buf_puts(&b, value);
    if (o->sid.p) {
        mc_buf_puts(&b, ",\"sessionId\":");
        mc_buf_append(&b, o->sid.p, o->sid.n);
    }
    mc_buf_append(&b, "}", 1);
    settle(st, o, b.data, b.len);
    mc_buf_fini(&b);
}

void ref_rpc_result(ref_state *st, const ref_origin *o, const char *result) {
    answer(st, o, "result", result);
}

void ref_rpc_error(ref_state *st, const ref_origin *o, int code, const char *data) {
    mc_buf e;
    mc_buf_init(&e);
    mc_buf_printf(&e, "{\"code\":%d,\"message\":\"%s\"", code, message_of(code));
    if (data) {
        mc_buf_puts(&e, ",\"data\":");
        add_quoted(&e, data);
    }
    mc_buf_append(&e, "}", 1);
    answer(st, o, "error", e.data);
    mc_buf_fini(&e);
}

void ref_rpc_silent(ref_state *st, const ref_origin *o) {
    settle(st, o, NULL, 0);
}

void ref_rpc_parse_error(ref_state *st, const char *why) {
    ref_origin o;
    memset(&o, 0, sizeof o);
    ref_rpc_error(st, &o, REF_RPC_PARSE_ERROR, why);
}

void ref_rpc_send(ref_state *st, ref_span id, const char *method, const char *params,
                  ref_span sid) {
    mc_buf b;
    mc_buf_init(&b);
    mc_buf_puts(&b, "{\"jsonrpc\":\"2.0\"");
    if (id.p) {
        mc_buf_puts(&b, ",\"id\":");
        mc_buf_append(&b, id.p, id.n);
    }
    mc_buf_puts(&b, ",\"method\":");
    add_quoted(&b, method);
    if (params) {
        mc_buf_puts(&b, ",\"params\":");
        mc_buf_puts(&b, params);
    }
    if (sid.p) {
        mc_buf_puts(&b, ",\"sessionId\":");
        mc_buf_append(&b, sid.p, sid.n);
    }
    mc_buf_append(&b, "}", 1);
    ref_out_line(&st->out, b.data, b.len);
    mc_buf_fini(&b);
}

ref_batch *ref_rpc_batch_new(size_t n) {
    ref_batch *b = mc_xcalloc(1, sizeof *b);
    b->n = n;
    b->waiting = n + 1; /* the extra one is released by ref_rpc_batch_done */
    b->answers = mc_xcalloc(n, sizeof *b->answers);
    for (size_t i = 0; i < n; i++)
        mc_buf_init(&b->answers[i]);
    return b;
}

void ref_rpc_batch_done(ref_state *st, ref_batch *b) {
    batch_release(st, b);
}
