/* The restart policy (spec 7.1.3, SB-I-9, SB-I-10): exponential backoff,
 * and no more restarts once max_restarts have happened inside the sliding
 * restart_window_sec. Pure: time comes in as an argument. */
#ifndef SB_RESTART_H
#define SB_RESTART_H

#include "bus_limits.h"

#include <stdint.h>

typedef struct {
    int64_t *times; /* ring of the last restarts, ms */
    int cap;        /* max_restarts (>= 1 when allocated) */
} sb_restart_history;

/* Returns 0 or STDIO_BUS_ERR (out of memory). */
int sb_restart_init(sb_restart_history *h, int max_restarts);
void sb_restart_fini(sb_restart_history *h);

/* Restarts recorded within the window ending at now_ms. */
int sb_restart_recent(const sb_restart_history *h, const sb_limits *l, int64_t now_ms);

/* Called when a worker exited unexpectedly at now_ms. Returns the delay in
 * ms before its restart (and records the restart), or STDIO_BUS_EFULL when
 * max_restarts restarts already happened within restart_window_sec. */
long sb_restart_decide(sb_restart_history *h, const sb_limits *l, int64_t now_ms);

#endif
