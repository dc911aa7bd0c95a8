/* Monotonic time helpers (see clock.h). */
#include "common/clock.h"

#include <errno.h>
#include <limits.h>
#include <time.h>

int64_t mc_clock_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t mc_clock_earliest(int64_t a, int64_t b) {
    if (a == 0)
        return b;
    if (b == 0)
        return a;
    return a < b ? a : b;
}

int mc_clock_timeout_ms(int64_t deadline, int64_t now) {
    if (deadline == 0)
        return -1;
    if (deadline <= now)
        return 0;
    int64_t ms = (deadline - now + MC_NS_PER_MS - 1) / MC_NS_PER_MS;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

void mc_clock_sleep_ms(long ms) {
    struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&left, &left) < 0 && errno == EINTR)
        ;
}
