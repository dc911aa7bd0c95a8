/* JSON-RPC 2.0 over NDJSON: each input line is checked, parsed and
 * classified (request, notification, response, batch); envelopes are
 * validated; answers are built with the request's raw id and sessionId and
 * written, or collected into the answer of their batch.
 *
 * Every message gets exactly one outcome, now or later: a result, an
 * error, or silence (notifications, responses, cancelled requests). The
 * MCP layer owes that outcome for the requests it is given. */
#ifndef REF_RPC_H
#define REF_RPC_H

#include <stddef.h>

#include "ref_msg.h"
#include "ref_state.h"

#define REF_RPC_PARSE_ERROR      -32700
#define REF_RPC_INVALID_REQUEST  -32600
#define REF_RPC_METHOD_NOT_FOUND -32601
#define REF_RPC_INVALID_PARAMS   -32602
#define REF_RPC_INTERNAL_ERROR   -32603

/* Handles one input line, without its newline. Blank lines are ignored. */
void ref_rpc_line(ref_state *st, const char *p, size_t n);
/* Answers a line that could not be read as JSON: id null, no sessionId.
 * `why` goes in error.data. */
void ref_rpc_parse_error(ref_state *st, const char *why);

/* The outcomes of a message. result: compact JSON text of the result.
 * data: error.data (a string), or NULL for none. */
void ref_rpc_result(ref_state *st, const ref_origin *o, const char *result);
void ref_rpc_error(ref_state *st, const ref_origin *o, int code, const char *data);
void ref_rpc_silent(ref_state *st, const ref_origin *o);

/* Writes a message of the worker's own: a request to the client when id.p
 * is set, else a notification. params: compact JSON text or NULL; sid: the
 * raw sessionId to copy, or {NULL, 0}. */
void ref_rpc_send(ref_state *st, ref_span id, const char *method, const char *params, ref_span sid);

#endif
