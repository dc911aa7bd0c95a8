/* JSON-RPC 2.0 outcomes: answers built with the request's raw id and
 * sessionId and written, or collected into the answer of their batch; and
 * the worker's own messages to the client.
 *
 * Every message gets exactly one outcome, now or later: a result, an
 * error, or silence (notifications, responses, cancelled requests). The
 * layer that reads messages (ref_recv.h) and the MCP layer (ref_mcp.h,
 * ref_tools.h) owe that outcome for the messages they are given; this
 * layer calls none of them. */
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

/* Answers a line that could not be read as JSON: id null, no sessionId.
 * `why` goes in error.data. */
void ref_rpc_parse_error(ref_state *st, const char *why);

/* The outcomes of a message. result: compact JSON text of the result.
 * data: error.data (a string), or NULL for none. */
void ref_rpc_result(ref_state *st, const ref_origin *o, const char *result);
void ref_rpc_error(ref_state *st, const ref_origin *o, int code, const char *data);
void ref_rpc_silent(ref_state *st, const ref_origin *o);

/* A batch of n >= 1 messages being read; origins in it name it and their
 * slot. Its one answer line is written once every slot has its outcome
 * and ref_rpc_batch_done has been called, which frees it. */
ref_batch *ref_rpc_batch_new(size_t n);
void ref_rpc_batch_done(ref_state *st, ref_batch *b);

/* Writes a message of the worker's own: a request to the client when id.p
 * is set, else a notification. params: compact JSON text or NULL; sid: the
 * raw sessionId to copy, or {NULL, 0}. */
void ref_rpc_send(ref_state *st, ref_span id, const char *method, const char *params, ref_span sid);

#endif
