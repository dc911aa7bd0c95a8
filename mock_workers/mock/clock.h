/* Monotonic time. Every timer in the mock is an absolute deadline in
 * CLOCK_MONOTONIC nanoseconds; 0 means "no deadline". */
#ifndef MW_CLOCK_H
#define MW_CLOCK_H

#include <stdint.h>

#define MW_NS_PER_MS 1000000LL

int64_t mw_clock_now(void);
/* The earlier of two deadlines, ignoring 0 ("none"). */
int64_t mw_clock_earliest(int64_t a, int64_t b);
/* poll() timeout for a deadline: -1 for none, else ms rounded up. */
int mw_clock_timeout_ms(int64_t deadline, int64_t now);
/* Sleeps the whole duration, resuming after signals (which the self-pipe
 * keeps for the loop). */
void mw_clock_sleep_ms(long ms);

#endif
