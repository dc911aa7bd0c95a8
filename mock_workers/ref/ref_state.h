/* What the protocol layers share: the output queue, the requests in
 * flight and the clock. The poll loop (ref_loop.c) owns it. */
#ifndef REF_STATE_H
#define REF_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "ref_call.h"
#include "ref_out.h"

typedef struct ref_state {
    ref_out out;
    ref_calls calls;
    int64_t now;              /* CLOCK_MONOTONIC ns, updated by the loop */
    unsigned long sample_seq; /* last "ref-<n>" sent to the client */
    bool closing;             /* EOF or SIGTERM: nothing more will be read */
} ref_state;

#endif
