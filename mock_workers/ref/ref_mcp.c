/* MCP lifecycle and method dispatch (see ref_mcp.h). */
#include "ref_mcp.h"

#include <string.h>

#include <cjson/cJSON.h>

#include "common/buf.h"
#include "common/diag.h"
#include "ref_rpc.h"
#include "ref_tools.h"

/* Protocol revisions this worker speaks, newest first. Nothing it does
 * differs between them. */
static const char *const versions[] = {"2025-06-18", "2025-03-26", "2024-11-05"};

static void initialize(ref_state *st, const ref_msg *m) {
    const cJSON *asked = cJSON_GetObjectItemCaseSensitive(m->params, "protocolVersion");
    if (!cJSON_IsObject(m->params) || !cJSON_IsString(asked)) {
        ref_rpc_error(st, &m->origin, REF_RPC_INVALID_PARAMS, "protocolVersion must be a string");
        return;
    }
    /* SB-T-9: the version asked for when we speak it, else our newest. */
    const char *version = versions[0];
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
        if (strcmp(asked->valuestring, versions[i]) == 0)
            version = versions[i];
    mc_buf r;
    mc_buf_init(&r);
    mc_buf_printf(
        &r,
        "{\"protocolVersion\":\"%s\",\"capabilities\":{\"tools\":{\"listChanged\":false}},"
        "\"serverInfo\":{\"name\":\"" REF_MCP_SERVER_NAME "\",\"version\":\"" REF_MCP_SERVER_VERSION
        "\"}}",
        version);
    ref_rpc_result(st, &m->origin, r.data);
    mc_buf_fini(&r);
}

void ref_mcp_request(ref_state *st, const ref_msg *m) {
    const char *method = m->method;
    if (strcmp(method, "initialize") == 0)
        initialize(st, m);
    else if (strcmp(method, "ping") == 0)
        ref_rpc_result(st, &m->origin, "{}");
    else if (strcmp(method, "tools/list") == 0)
        ref_tools_list(st, m);
    else if (strcmp(method, "tools/call") == 0)
        ref_tools_call(st, m);
    else {
        mc_diag_note("method not found: %s", method);
        mc_buf why;
        mc_buf_init(&why);
        mc_buf_printf(&why, "unknown method: %s", method);
        ref_rpc_error(st, &m->origin, REF_RPC_METHOD_NOT_FOUND, why.data);
        mc_buf_fini(&why);
    }
}

void ref_mcp_notification(ref_state *st, const ref_msg *m) {
    if (strcmp(m->method, "notifications/cancelled") == 0)
        ref_tools_cancel(st, m);
    else if (strcmp(m->method, "notifications/initialized") != 0)
        mc_diag_debug("notification ignored: %s", m->method);
}
