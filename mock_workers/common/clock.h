/* Monotonic time. Every timer in the test workers is an absolute deadline in
 * CLOCK_MONOTONIC nanoseconds; 0 means "no deadline". */
#ifndef MC_CLOCK_H
#define MC_CLOCK_H

#include <stdint.h>

#define MC_NS_PER_MS 1000000LL

int64_t mc_clock_now(void);
/* The earlier of two deadlines, ignoring 0 ("none"). */
int64_t mc_clock_earliest(int64_t a, int64_t b);
/* poll() timeout for a deadline: -1 for none, else ms rounded up. */
int mc_clock_timeout_ms(int64_t deadline, int64_t now);
/* Sleeps the whole duration, resuming after signals (which the self-pipe
 * keeps for the loop). */
void mc_clock_sleep_ms(long ms);

#endif
