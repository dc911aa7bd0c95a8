/* One incoming JSON-RPC message, as the JSON-RPC layer (ref_rpc.c) hands
 * it to the MCP layer (ref_mcp.c, ref_tools.c), and the origin an answer
 * goes back to. */
#ifndef REF_MSG_H
#define REF_MSG_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "ref_json.h"

/* A batch being answered (ref_rpc.c). */
typedef struct ref_batch ref_batch;

/* Where the answer to one message goes, and what it must copy. */
typedef struct ref_origin {
    ref_span id;      /* raw id token; p == NULL: answer with `null` */
    ref_span sid;     /* raw sessionId token (a JSON string); p == NULL: none */
    ref_batch *batch; /* the batch holding the message, or NULL */
    size_t slot;      /* its index in the batch */
} ref_origin;

typedef struct ref_msg {
    const cJSON *json;   /* the message object (borrowed) */
    ref_span raw;        /* its text */
    const char *method;  /* NULL for a response */
    const cJSON *params; /* NULL when absent */
    ref_span params_raw;
    ref_origin origin; /* spans into raw */
} ref_msg;

#endif
