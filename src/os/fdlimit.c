#include "fdlimit.h"
#include "bus_limits.h"
#include "log.h"

#include <errno.h>
#include <string.h>

rlim_t sb_fdlimit_need(int workers) {
    return (rlim_t)STDIO_BUS_MAX_CONNECTIONS + 3 * (rlim_t)workers + SB_FDLIMIT_MARGIN;
}

rlim_t sb_fdlimit_target(rlim_t soft, rlim_t hard, rlim_t need) {
    if (soft != RLIM_INFINITY && soft < need)
        return hard != RLIM_INFINITY && hard < need ? hard : need;
    return soft;
}

void sb_fdlimit_raise(int workers) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    rlim_t need = sb_fdlimit_need(workers);
    rlim_t target = sb_fdlimit_target(rl.rlim_cur, rl.rlim_max, need);
    if (target != rl.rlim_cur) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = target;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
            sb_warn(NULL, "cannot raise RLIMIT_NOFILE from %llu to %llu: %s",
                    (unsigned long long)was, (unsigned long long)target, strerror(errno));
            rl.rlim_cur = was;
        }
    }
    if (rl.rlim_cur < need)
        sb_warn(NULL,
                "RLIMIT_NOFILE is %llu (hard limit %llu), below the %llu descriptors that %d "
                "clients (MAX_CONNECTIONS) and %d worker(s) need: connections beyond that are "
                "closed at once",
                (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
                (unsigned long long)need, STDIO_BUS_MAX_CONNECTIONS, workers);
}
