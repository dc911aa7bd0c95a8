/* Requests in flight: a `slow` tool call waiting for its timer, or a
 * `sample` tool call waiting for the client's answer to the worker's own
 * request. Every other request is answered as soon as it is read.
 *
 * The table owns copies of the raw tokens, since the input line they came
 * from is gone by the time the answer is written. */
#ifndef REF_CALL_H
#define REF_CALL_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "ref_msg.h"

/* Requests in flight at once; one more is refused with -32603. */
#define REF_CALL_MAX 1024

typedef enum ref_call_kind { REF_CALL_SLOW, REF_CALL_SAMPLE } ref_call_kind;

typedef struct ref_call {
    struct ref_call *next;
    ref_call_kind kind;
    char *id;         /* owned raw id token */
    char *sid;        /* owned raw sessionId token, or NULL */
    ref_batch *batch; /* borrowed: the batch the answer goes to, or NULL */
    size_t slot;
    /* REF_CALL_SLOW */
    char *token; /* owned raw progressToken, or NULL */
    int64_t start_ns;
    int64_t due_ns; /* next progress step or the answer */
    long ms, steps, sent;
    /* REF_CALL_SAMPLE */
    unsigned long seq; /* the worker's request id is "ref-<seq>" */
} ref_call;

typedef struct ref_calls {
    ref_call *head;
    size_t n;
} ref_calls;

void ref_calls_init(ref_calls *c);
/* Frees every call. Callers settle them first (ref_tools_drain). */
void ref_calls_fini(ref_calls *c);
/* Adds a call for the request at origin o, copying its tokens. Returns
 * NULL when REF_CALL_MAX calls are in flight. */
ref_call *ref_calls_add(ref_calls *c, ref_call_kind kind, const ref_origin *o);
/* Unlinks and frees call. */
void ref_calls_remove(ref_calls *c, ref_call *call);
/* The answer's origin: spans into call's own copies. */
ref_origin ref_call_origin(const ref_call *call);
/* The first call after `after` (NULL: from the start) whose request had
 * the id `id` (compared as JSON values) and the sessionId `sid` (raw bytes;
 * absent matches absent). */
ref_call *ref_calls_match(ref_calls *c, ref_call *after, const cJSON *id, ref_span sid);
/* The sample call whose request to the client had id "ref-<seq>". */
ref_call *ref_calls_find_sample(ref_calls *c, unsigned long seq);
/* The earliest due_ns of the slow calls (a CLOCK_MONOTONIC deadline, as
 * in common/clock.h), or 0 for none. */
int64_t ref_calls_deadline(const ref_calls *c);

#endif
