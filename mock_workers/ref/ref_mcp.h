/* MCP over the JSON-RPC layer: the lifecycle methods (initialize, ping,
 * notifications/initialized), tools/list and tools/call (handed to
 * ref_tools.c), notifications/cancelled. Unknown methods: -32601 for a
 * request, silence for a notification.
 *
 * No per-connection state: one worker behind the bus serves many sessions
 * at once, each with its own `initialize` (SB-R-4). */
#ifndef REF_MCP_H
#define REF_MCP_H

#include "ref_msg.h"
#include "ref_state.h"

#define REF_MCP_SERVER_NAME    "ref_worker"
#define REF_MCP_SERVER_VERSION "0.1.0"

/* A request (m->origin.id set): settles m->origin exactly once, now or
 * later (ref_rpc.h). */
void ref_mcp_request(ref_state *st, const ref_msg *m);
/* A notification: never answered; the caller settles the origin. */
void ref_mcp_notification(ref_state *st, const ref_msg *m);

#endif
