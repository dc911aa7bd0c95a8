#include "phase.h"
#include "log.h"

const char *sb_phase_name(sb_phase p) {
    static const char *const names[] = {
        [SB_PHASE_SERVING] = "SERVING",   [SB_PHASE_LINGER] = "LINGER",
        [SB_PHASE_DRAINING] = "DRAINING", [SB_PHASE_KILLING] = "KILLING",
        [SB_PHASE_DONE] = "DONE",
    };
    return names[p];
}

/*   SERVING -> LINGER           stdio: stdin ended (SB-I-5), or the client left
 *   LINGER -> LINGER            stdio: the client left while lingering
 *   SERVING, LINGER -> DRAINING shutdown (10.2)
 *   DRAINING -> DONE            workers gone and clients flushed (SB-10.2-3)
 *   DRAINING -> KILLING         drain_timeout_sec: SIGKILL sent (SB-10.2-4)
 *   KILLING -> DONE             the killed workers reaped, or SB_KILL_REAP_MS */
void sb_phase_enter(sb_bus *d, sb_phase to, int64_t deadline_ms) {
    static const unsigned char allowed[] = {
        [SB_PHASE_SERVING] = 1u << SB_PHASE_LINGER | 1u << SB_PHASE_DRAINING,
        [SB_PHASE_LINGER] = 1u << SB_PHASE_LINGER | 1u << SB_PHASE_DRAINING,
        [SB_PHASE_DRAINING] = 1u << SB_PHASE_KILLING | 1u << SB_PHASE_DONE,
        [SB_PHASE_KILLING] = 1u << SB_PHASE_DONE,
        [SB_PHASE_DONE] = 0,
    };
    if (!(allowed[d->phase] & 1u << to))
        sb_error(NULL, "phase %s -> %s is not a transition", sb_phase_name(d->phase),
                 sb_phase_name(to));
    sb_timers_disarm(&d->timers, SB_TIMER_PHASE);
    d->phase = to;
    if (deadline_ms)
        sb_timers_arm(&d->timers, SB_TIMER_PHASE, deadline_ms);
}
