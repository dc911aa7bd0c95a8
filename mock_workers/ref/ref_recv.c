/* Reading JSON-RPC (see ref_recv.h). */
#include "ref_recv.h"

#include <stdbool.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/diag.h"
#include "common/status.h"
#include "ref_json.h"
#include "ref_mcp.h"
#include "ref_rpc.h"
#include "ref_tools.h"

static bool valid_id(const cJSON *id) {
    return cJSON_IsString(id) || cJSON_IsNumber(id) || cJSON_IsNull(id);
}

/* One message: a top-level object, or one element of a batch. */
static void message(ref_state *st, const cJSON *json, ref_span raw, ref_batch *batch, size_t slot) {
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
        if (cJSON_GetObjectItemCaseSensitive(json, "result") ||
            cJSON_GetObjectItemCaseSensitive(json, "error")) {
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

static void batch(ref_state *st, const cJSON *json, ref_span raw) {
    int n = cJSON_GetArraySize(json);
    if (n <= 0) {
        ref_origin o;
        memset(&o, 0, sizeof o);
        mc_diag_note("invalid request: empty batch");
        ref_rpc_error(st, &o, REF_RPC_INVALID_REQUEST, "empty batch"); /* SB-J-14 */
        return;
    }
    ref_batch *b = ref_rpc_batch_new((size_t)n);
    size_t i = 0;
    for (const cJSON *it = json->child; it; it = it->next, i++) {
        ref_span el;
        if (ref_json_element(raw, i, &el) != MC_OK) {
            el.p = NULL; /* cannot happen for a checked text */
            el.n = 0;
        }
        message(st, it, el, b, i);
    }
    ref_rpc_batch_done(st, b);
}

static bool blank(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return false;
    return true;
}

void ref_recv_line(ref_state *st, const char *p, size_t n) {
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
    ref_span raw = {p, n};
    if (cJSON_IsArray(json))
        batch(st, json, raw);
    else
        message(st, json, raw, NULL, 0);
    cJSON_Delete(json);
}
