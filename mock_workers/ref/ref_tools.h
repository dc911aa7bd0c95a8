/* The tools of ref_worker and the requests they keep in flight.
 *
 *   echo   {text}          -> the text
 *   add    {a, b}          -> the sum, as text; -32603 if it overflows
 *   slow   {ms, steps}     -> waits ms, sending notifications/progress at
 *                             each of `steps` steps when the request gave a
 *                             progressToken; timer driven, cancellable
 *   sample {prompt, maxTokens} -> asks the client (sampling/createMessage,
 *                             id "ref-<n>") and answers with its text
 *
 * Results are {"content":[{"type":"text","text":...}]}. */
#ifndef REF_TOOLS_H
#define REF_TOOLS_H

#include "ref_msg.h"
#include "ref_state.h"

/* Longest `slow` call: well within the daemon's default drain_timeout_sec
 * (30 s), so a worker told to stop can always finish (SB-R-3). */
#define REF_TOOLS_SLOW_MAX_MS    20000
#define REF_TOOLS_SLOW_MAX_STEPS 1000

/* tools/list and tools/call requests; each settles m->origin (ref_rpc.h). */
void ref_tools_list(ref_state *st, const ref_msg *m);
void ref_tools_call(ref_state *st, const ref_msg *m);
/* notifications/cancelled: drops the named request(s) without an answer. */
void ref_tools_cancel(ref_state *st, const ref_msg *m);
/* A response from the client: completes the sample call it answers. */
void ref_tools_response(ref_state *st, const ref_msg *m);
/* Sends the progress notifications and answers that are due at st->now. */
void ref_tools_tick(ref_state *st);
/* Nothing more will be read: answers every sample call, whose client
 * response can no longer arrive, with -32603 and `why` as data. Slow calls
 * run on. */
void ref_tools_drain(ref_state *st, const char *why);
/* stdout is gone: settles every call in silence and frees it. */
void ref_tools_abandon(ref_state *st);

#endif
