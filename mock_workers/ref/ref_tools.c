/* The tools and their calls in flight (see ref_tools.h). */
#include "ref_tools.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/buf.h"
#include "common/diag.h"
#include "ref_call.h"
#include "ref_rpc.h"

#define SAMPLE_DEFAULT_MAX_TOKENS 100
#define SAMPLE_MAX_MAX_TOKENS     1000000

/* The tools/list result, fixed. */
static const char tools_json[] =
    "{\"tools\":["
    "{\"name\":\"echo\",\"description\":\"Returns its text.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},"
    "\"required\":[\"text\"]}},"
    "{\"name\":\"add\",\"description\":\"Adds two numbers.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},"
    "\"b\":{\"type\":\"number\"}},\"required\":[\"a\",\"b\"]}},"
    "{\"name\":\"slow\",\"description\":\"Waits ms milliseconds in steps, with a progress "
    "notification per step; cancellable.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":20000},"
    "\"steps\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":1000,\"default\":1}},"
    "\"required\":[\"ms\"]}},"
    "{\"name\":\"sample\",\"description\":\"Asks the client for a completion "
    "(sampling/createMessage) and returns its text.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"prompt\":{\"type\":\"string\"},"
    "\"maxTokens\":{\"type\":\"integer\",\"minimum\":1,\"default\":100}},"
    "\"required\":[\"prompt\"]}}"
    "]}";

/* Compact JSON of a cJSON tree; ends the process when out of memory (as
 * mc_buf does). The caller frees the text with cJSON_free. */
static char *print(const cJSON *json) {
    char *text = json ? cJSON_PrintUnformatted(json) : NULL;
    if (!text)
        mc_diag_oom();
    return text;
}

/* {"content":[{"type":"text","text":<text>}]}, with "isError":true for a
 * tool that failed (MCP: a tool execution error, not a protocol error). */
static void text_result(ref_state *st, const ref_origin *o, const char *text, bool is_error) {
    cJSON *r = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(r, "content");
    cJSON *item = cJSON_CreateObject();
    cJSON_AddItemToArray(content, item);
    cJSON_AddStringToObject(item, "type", "text");
    cJSON_AddStringToObject(item, "text", text);
    if (is_error)
        cJSON_AddTrueToObject(r, "isError");
    char *json = print(r);
    ref_rpc_result(st, o, json);
    cJSON_free(json);
    cJSON_Delete(r);
}

static void invalid(ref_state *st, const ref_origin *o, const char *why) {
    mc_diag_note("invalid params: %s", why);
    ref_rpc_error(st, o, REF_RPC_INVALID_PARAMS, why);
}

/* An integer-valued JSON number in [lo, hi]; absent gives def. */
static bool integer(const cJSON *v, long lo, long hi, long def, long *out) {
    if (!v) {
        *out = def;
        return true;
    }
    /* Range first: the cast below is only defined for values in range. */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= (double)lo && v->valuedouble <= (double)hi) ||
        v->valuedouble != (double)(long)v->valuedouble)
        return false;
    *out = (long)v->valuedouble;
    return true;
}

/* The shortest %g text that reads back as d, as JavaScript or Python
 * would print it: 0.1 + 0.2 gives 0.30000000000000004, 2 + 3 gives 5. */
static void shortest(double d, char *out, size_t size) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, size, "%.*g", prec, d);
        if (strtod(out, NULL) == d)
            return;
    }
}

static void tool_echo(ref_state *st, const ref_msg *m, const cJSON *args) {
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(args, "text");
    if (!cJSON_IsString(text)) {
        invalid(st, &m->origin, "echo: text must be a string");
        return;
    }
    text_result(st, &m->origin, text->valuestring, false);
}

static void tool_add(ref_state *st, const ref_msg *m, const cJSON *args) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(args, "a");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(args, "b");
    if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b)) {
        invalid(st, &m->origin, "add: a and b must be numbers");
        return;
    }
    double sum = a->valuedouble + b->valuedouble;
    if (!isfinite(sum)) {
        /* Valid params, but no JSON number can carry the answer: the
         * worker failed, not the caller (SB-J-9). */
        mc_diag_note("internal error: add: the sum is not a finite number");
        ref_rpc_error(st, &m->origin, REF_RPC_INTERNAL_ERROR,
                      "add: the sum is not a finite number");
        return;
    }
    char text[64];
    shortest(sum, text, sizeof text);
    text_result(st, &m->origin, text, false);
}

/* When the slow call's next event (progress step or answer) is due. */
static int64_t slow_due(const ref_call *c) {
    long at = c->sent < c->steps ? c->sent + 1 : c->steps;
    int64_t span = (int64_t)c->ms * 1000000;
    return c->start_ns + (c->steps ? span * at / c->steps : span);
}

static void tool_slow(ref_state *st, const ref_msg *m, const cJSON *args) {
    long ms, steps;
    if (!integer(cJSON_GetObjectItemCaseSensitive(args, "ms"), 0, REF_TOOLS_SLOW_MAX_MS, -1, &ms) ||
        ms < 0) {
        invalid(st, &m->origin, "slow: ms must be an integer from 0 to 20000");
        return;
    }
    if (!integer(cJSON_GetObjectItemCaseSensitive(args, "steps"), 0, REF_TOOLS_SLOW_MAX_STEPS, 1,
                 &steps)) {
        invalid(st, &m->origin, "slow: steps must be an integer from 0 to 1000");
        return;
    }
    /* params._meta.progressToken, kept as its raw token (SB-F-4). */
    ref_span meta_raw, token_raw = {NULL, 0};
    const cJSON *meta = ref_json_get(m->params, m->params_raw, "_meta", &meta_raw);
    const cJSON *token = ref_json_get(meta, meta_raw, "progressToken", &token_raw);
    if (token && !cJSON_IsString(token) && !cJSON_IsNumber(token)) {
        invalid(st, &m->origin, "progressToken must be a string or a number");
        return;
    }
    ref_call *c = ref_calls_add(&st->calls, REF_CALL_SLOW, &m->origin);
    if (!c) {
        mc_diag_note("internal error: too many requests in flight");
        ref_rpc_error(st, &m->origin, REF_RPC_INTERNAL_ERROR, "too many requests in flight");
        return;
    }
    c->token = token ? mc_xstrndup(token_raw.p, token_raw.n) : NULL;
    c->start_ns = st->now;
    c->ms = ms;
    c->steps = steps;
    c->due_ns = slow_due(c);
}

static void tool_sample(ref_state *st, const ref_msg *m, const cJSON *args) {
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(args, "prompt");
    long max_tokens;
    if (!cJSON_IsString(prompt)) {
        invalid(st, &m->origin, "sample: prompt must be a string");
        return;
    }
    if (!integer(cJSON_GetObjectItemCaseSensitive(args, "maxTokens"), 1, SAMPLE_MAX_MAX_TOKENS,
                 SAMPLE_DEFAULT_MAX_TOKENS, &max_tokens)) {
        invalid(st, &m->origin, "sample: maxTokens must be a positive integer");
        return;
    }
    ref_call *c = ref_calls_add(&st->calls, REF_CALL_SAMPLE, &m->origin);
    if (!c) {
        mc_diag_note("internal error: too many requests in flight");
        ref_rpc_error(st, &m->origin, REF_RPC_INTERNAL_ERROR, "too many requests in flight");
        return;
    }
    c->seq = ++st->sample_seq;

    cJSON *p = cJSON_CreateObject();
    cJSON *msgs = cJSON_AddArrayToObject(p, "messages");
    cJSON *msg = cJSON_CreateObject();
    cJSON_AddItemToArray(msgs, msg);
    cJSON_AddStringToObject(msg, "role", "user");
    cJSON *content = cJSON_AddObjectToObject(msg, "content");
    cJSON_AddStringToObject(content, "type", "text");
    cJSON_AddStringToObject(content, "text", prompt->valuestring);
    cJSON_AddNumberToObject(p, "maxTokens", (double)max_tokens);
    char *params = print(p);
    char id[32];
    int n = snprintf(id, sizeof id, "\"ref-%lu\"", c->seq);
    /* SB-F-11: the worker's request carries the sessionId of the request
     * it serves, so the daemon can route it to that session's client. */
    ref_origin o = ref_call_origin(c);
    ref_rpc_send(st, (ref_span){id, (size_t)n}, "sampling/createMessage", params, o.sid);
    cJSON_free(params);
    cJSON_Delete(p);
}

void ref_tools_list(ref_state *st, const ref_msg *m) {
    ref_rpc_result(st, &m->origin, tools_json);
}

void ref_tools_call(ref_state *st, const ref_msg *m) {
    if (!cJSON_IsObject(m->params)) {
        invalid(st, &m->origin, "params must be an object");
        return;
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(m->params, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(m->params, "arguments");
    if (!cJSON_IsString(name)) {
        invalid(st, &m->origin, "name must be a string");
        return;
    }
    if (args && !cJSON_IsObject(args)) {
        invalid(st, &m->origin, "arguments must be an object");
        return;
    }
    const char *tool = name->valuestring;
    if (strcmp(tool, "echo") == 0)
        tool_echo(st, m, args);
    else if (strcmp(tool, "add") == 0)
        tool_add(st, m, args);
    else if (strcmp(tool, "slow") == 0)
        tool_slow(st, m, args);
    else if (strcmp(tool, "sample") == 0)
        tool_sample(st, m, args);
    else {
        mc_buf why;
        mc_buf_init(&why);
        mc_buf_printf(&why, "unknown tool: %s", tool);
        invalid(st, &m->origin, why.data); /* SB-T-14 */
        mc_buf_fini(&why);
    }
}

void ref_tools_cancel(ref_state *st, const ref_msg *m) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m->params, "requestId");
    if (!cJSON_IsString(id) && !cJSON_IsNumber(id)) {
        mc_diag_note("notifications/cancelled without a requestId: ignored");
        return;
    }
    char *shown = print(id);
    bool any = false;
    ref_call *c;
    /* SB-R-5: only the request of the same session (sessionId) is meant. */
    while ((c = ref_calls_match(&st->calls, NULL, id, m->origin.sid)) != NULL) {
        ref_origin o = ref_call_origin(c);
        ref_rpc_silent(st, &o); /* SB-F-8: a cancelled request gets no answer */
        ref_calls_remove(&st->calls, c);
        any = true;
    }
    if (any)
        mc_diag_note("cancelled request %s", shown);
    else
        mc_diag_note("cancel: no request %s in flight (finished or unknown): ignored", shown);
    cJSON_free(shown);
}

/* "ref-<n>" -> n, or 0 when the id is not one of ours. */
static unsigned long sample_seq(const cJSON *id) {
    if (!cJSON_IsString(id) || strncmp(id->valuestring, "ref-", 4) != 0)
        return 0;
    const char *digits = id->valuestring + 4;
    if (*digits < '1' || *digits > '9')
        return 0;
    char *end;
    unsigned long n = strtoul(digits, &end, 10);
    return *end ? 0 : n;
}

void ref_tools_response(ref_state *st, const ref_msg *m) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m->json, "id");
    unsigned long seq = sample_seq(id);
    ref_call *c = seq ? ref_calls_find_sample(&st->calls, seq) : NULL;
    if (!c) {
        char *shown = id ? print(id) : NULL;
        mc_diag_note("response to no request of ours (id %s): ignored", shown ? shown : "absent");
        cJSON_free(shown);
        return;
    }
    ref_origin o = ref_call_origin(c);
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(m->json, "error");
    const cJSON *result = cJSON_GetObjectItemCaseSensitive(m->json, "result");
    if (error) {
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(error, "message");
        mc_buf t;
        mc_buf_init(&t);
        mc_buf_printf(&t, "sampling failed: %s",
                      cJSON_IsString(msg) ? msg->valuestring : "no message");
        text_result(st, &o, t.data, true);
        mc_buf_fini(&t);
    } else {
        /* The text of a CreateMessageResult, else the whole result. */
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(content, "text");
        if (cJSON_IsString(text))
            text_result(st, &o, text->valuestring, false);
        else {
            char *whole = print(result);
            text_result(st, &o, whole, false);
            cJSON_free(whole);
        }
    }
    ref_calls_remove(&st->calls, c);
}

void ref_tools_tick(ref_state *st) {
    ref_call *next;
    for (ref_call *c = st->calls.head; c; c = next) {
        next = c->next;
        if (c->kind != REF_CALL_SLOW)
            continue;
        ref_origin o = ref_call_origin(c);
        while (c->due_ns <= st->now && c->sent < c->steps) {
            c->sent++;
            if (c->token) { /* SB-F-5: no token, no progress */
                mc_buf p;
                mc_buf_init(&p);
                mc_buf_printf(&p, "{\"progressToken\":%s,\"progress\":%ld,\"total\":%ld}", c->token,
                              c->sent, c->steps);
                ref_rpc_send(st, (ref_span){NULL, 0}, "notifications/progress", p.data, o.sid);
                mc_buf_fini(&p);
            }
            c->due_ns = slow_due(c);
        }
        if (c->due_ns <= st->now && c->sent == c->steps) {
            char text[96];
            snprintf(text, sizeof text, "slept %ld ms in %ld steps", c->ms, c->steps);
            text_result(st, &o, text, false);
            ref_calls_remove(&st->calls, c);
        }
    }
}

void ref_tools_drain(ref_state *st, const char *why) {
    ref_call *next;
    for (ref_call *c = st->calls.head; c; c = next) {
        next = c->next;
        if (c->kind != REF_CALL_SAMPLE)
            continue;
        ref_origin o = ref_call_origin(c);
        mc_diag_note("sample call %s abandoned: %s", c->id, why);
        ref_rpc_error(st, &o, REF_RPC_INTERNAL_ERROR, why); /* SB-R-8 */
        ref_calls_remove(&st->calls, c);
    }
}

void ref_tools_abandon(ref_state *st) {
    while (st->calls.head) {
        ref_origin o = ref_call_origin(st->calls.head);
        ref_rpc_silent(st, &o);
        ref_calls_remove(&st->calls, st->calls.head);
    }
}
