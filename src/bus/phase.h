/* The daemon's phase (sb_phase in bus.h) and the one function that
 * changes it. */
#ifndef SB_PHASE_H
#define SB_PHASE_H

#include "bus.h"

#include <stdint.h>

/* The one place the daemon's phase changes: checks the transition against
 * the table in phase.c and sets the phase's deadline (LINGER, DRAINING;
 * absolute ms) and its timer. */
void sb_phase_enter(sb_bus *d, sb_phase to, int64_t deadline_ms);
const char *sb_phase_name(sb_phase p);

#endif
