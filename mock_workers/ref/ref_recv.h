/* Reading JSON-RPC 2.0 over NDJSON: each input line is checked as strict
 * JSON, parsed and classified (request, notification, response, batch);
 * envelopes are validated. Requests and notifications go to the MCP layer
 * (ref_mcp.h), responses to the tools waiting for them (ref_tools.h);
 * what cannot be read is answered here (ref_rpc.h). */
#ifndef REF_RECV_H
#define REF_RECV_H

#include <stddef.h>

#include "ref_state.h"

/* Handles one input line, without its newline. Blank lines are ignored. */
void ref_recv_line(ref_state *st, const char *p, size_t n);

#endif
