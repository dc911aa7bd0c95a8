/* The connections a worker's exit ends under connection affinity (SB-X-14). */
#ifndef SB_AFFINITY_EXIT_H
#define SB_AFFINITY_EXIT_H

#include "bus.h"

#include <stdbool.h>

/* SB-X-14: ends the connections bound to w, which exited (retired: because
 * its client ended, SB-X-19); true for a per_connection slot, which is not
 * restarted (SB-X-15). */
bool sb_supervise_affinity_exited(sb_bus *d, sb_worker *w, bool retired);

#endif
