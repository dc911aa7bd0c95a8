/* JSON-RPC 2.0 over NDJSON (see ref_rpc.h). */
#include "ref_rpc.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/buf.h"
#include "common/diag.h"
#include "ref_mcp.h"
#include "ref_status.h"
#include "ref_tools.h"

struct ref_batch {
    size_t n;        /* messages in the batch */
    size_t waiting;  /* outcomes still owed, plus one while it is being read */
    mc_buf *answers;/* one per message; empty: no answer */
};

static const char *message_of(int code)
{
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
static void add_quoted(mc_buf *b, const char *s)
{
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
static void batch_emit(ref_state *st, ref_batch *b)
{
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

static void batch_release(ref_state *st, ref_batch *b)
{
    if (--b->waiting == 0)
        batch_emit(st, b);
}

/* The one outcome of the message at o: a line, or NULL for silence. */
static void settle(ref_state *st, const ref_origin *o, const char *line, size_t n)
{
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
static void answer(ref_state *st, const ref_origin *o, const char *member, const char *value)
{
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

void ref_rpc_result(ref_state *st, const ref_origin *o, const char *result)
{
    answer(st, o, "result", result);
}

void ref_rpc_error(ref_state *st, const ref_origin *o, int code, const char *data)
{
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

void ref_rpc_silent(ref_state *st, const ref_origin *o)
{
    settle(st, o, NULL, 0);
}

void ref_rpc_parse_error(ref_state *st, const char *why)
{
    ref_origin o;
    memset(&o, 0, sizeof o);
    ref_rpc_error(st, &o, REF_RPC_PARSE_ERROR, why);
}

void ref_rpc_send(ref_state *st, ref_span id, const char *method, const char *params, ref_span sid)
{
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

static bool valid_id(const cJSON *id)
{
    return cJSON_IsString(id) || cJSON_IsNumber(id) || cJSON_IsNull(id);
}

/* One message: a top-level object, or one element of a batch. */
static void message(ref_state *st, const cJSON *json, ref_span raw, ref_batch *batch, size_t slot)
{
    ref_msg m;
    memset(&m, 0, sizeof m);
    m.json = json;
    m.raw = raw;
    m.origin.batch = batch;
    m.origin.slot = slot;
    if (!cJSON_IsObject(json)) {
        mc_diag_note("invalid request: not an object");
        ref_rpc_error(st, &m.origin, REF_RPC_INVALID_REQUEST, "not an object");
        return;
    }

    ref_span id_raw, sid_raw, dummy;
    const cJSON *id = ref_json_get(json, raw, "id", &id_raw);
    const cJSON *sid = ref_json_get(json, raw, "sessionId", &sid_raw);
    /* SB-R-2: only a string sessionId is copied; anything else would make
     * the daemon drop the worker's answer as malformed. */
    if (cJSON_IsString(sid))
        m.origin.sid = sid_raw;
    /* JSON-RPC 2.0 section 5: the id of an invalid request is echoed when it
     * could be read, else it is null (SB-R-13). */
    if (id && valid_id(id))
        m.origin.id = id_raw;

    const cJSON *method = ref_json_get(json, raw, "method", &dummy);
    if (!method) {
        if (cJSON_GetObjectItemCaseSensitive(json, "result")
            || cJSON_GetObjectItemCaseSensitive(json, "error")) {
            /* SB-R-10: a response to the worker's own request is never
             * answered, whatever it holds. */
            ref_tools_response(st, &m);
            ref_rpc_silent(st, &m.origin);
            return;
        }
        mc_diag_note("invalid request: neither a request nor a response");
        ref_rpc_error(st, &m.origin, REF_RPC_INVALID_REQUEST, "neither a request nor a response");
        return;
    }

    const cJSON *version = cJSON_GetObjectItemCaseSensitive(json, "jsonrpc");
    const char *why = NULL;
    if (!cJSON_IsString(version) || strcmp(version->valuestring, "2.0") != 0)
        why = "jsonrpc must be \"2.0\"";
    else if (!cJSON_IsString(method))
        why = "method must be a string";
    else if (id && !valid_id(id))
        why = "id must be a string, a number or null";
    m.params = ref_json_get(json, raw, "params", &m.params_raw);
    if (!why && m.params && !cJSON_IsObject(m.params) && !cJSON_IsArray(m.params))
        why = "params must be an object or an array"; /* SB-R-9 */
    if (why) {
        mc_diag_note("invalid request: %s", why);
        ref_rpc_error(st, &m.origin, REF_RPC_INVALID_REQUEST, why);
        return;
    }

    m.method = method->valuestring;
    if (!id) {
        mc_diag_debug("notification %s", m.method);
        ref_mcp_notification(st, &m);
        ref_rpc_silent(st, &m.origin); /* SB-J-10: never answered */
        return;
    }
    mc_diag_debug("request %.*s %s", (int)(id_raw.n > 64 ? 64 : id_raw.n), id_raw.p, m.method);
    ref_mcp_request(st, &m);
}

static void batch(ref_state *st, const cJSON *json, ref_span raw)
{
    int n = cJSON_GetArraySize(json);
    if (n <= 0) {
        ref_origin o;
        memset(&o, 0, sizeof o);
        mc_diag_note("invalid request: empty batch");
        ref_rpc_error(st, &o, REF_RPC_INVALID_REQUEST, "empty batch"); /* SB-J-14 */
        return;
    }
    ref_batch *b = mc_xcalloc(1, sizeof *b);
    b->n = (size_t)n;
    b->waiting = b->n + 1; /* the extra one is released below */
    b->answers = mc_xcalloc(b->n, sizeof *b->answers);
    for (size_t i = 0; i < b->n; i++)
        mc_buf_init(&b->answers[i]);
    size_t i = 0;
    for (const cJSON *it = json->child; it; it = it->next, i++) {
        ref_span el;
        if (ref_json_element(raw, i, &el) != MC_OK) {
            el.p = NULL; /* cannot happen for a checked text */
            el.n = 0;
        }
        message(st, it, el, b, i);
    }
    batch_release(st, b);
}

static bool blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return false;
    return true;
}

void ref_rpc_line(ref_state *st, const char *p, size_t n)
{
    if (blank(p, n))
        return; /* SB-F-13 */
    int rc = ref_json_check(p, n);
    cJSON *json = NULL;
    if (rc == MC_OK) {
        json = cJSON_ParseWithLength(p, n);
        if (!json)
            rc = REF_JSON_ESYNTAX; /* e.g. a lone surrogate escape, "\ud800" */
    }
    if (rc != MC_OK) {
        mc_diag_note("parse error: %s", ref_json_strerror(rc));
        ref_rpc_parse_error(st, ref_json_strerror(rc)); /* SB-J-4 */
        return;
    }
    ref_span raw = { p, n };
    if (cJSON_IsArray(json))
        batch(st, json, raw);
    else
        message(st, json, raw, NULL, 0);
    cJSON_Delete(json);
}
