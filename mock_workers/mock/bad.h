/* Bad output (--mode bad --bad KIND): the exact bytes of each kind are in
 * README.md. Triggered by the first request (its id and sessionId are used)
 * or at start (--trigger start: id "mock-bad", no sessionId). */
#ifndef MW_BAD_H
#define MW_BAD_H

#include <stdbool.h>

#include "opts.h"
#include "out.h"

/* Queues the bad output of `kind`. id_raw is the id token to use, sid_raw
 * the sessionId token or NULL. bytes is --bytes (longline). Returns true
 * when the bad output stands in for the request's answer (nonewline,
 * badutf8, longline), false when the normal answer should follow. */
bool mw_bad_emit(mw_out *out, mw_bad_kind kind, const char *id_raw, const char *sid_raw,
                 long bytes);

#endif
