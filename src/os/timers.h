/* A set of timers (STYLE 8): one absolute monotonic deadline per timer id,
 * 0..cap-1, and the next deadline of them all for poll()'s timeout.
 *
 * Pure: no clock, no I/O; allocated once. Arming, re-arming and disarming
 * are O(1); the next deadline and the next due timer look only at the
 * armed timers, which are few (a worker restarting, a client over its
 * output cap, the idle sweep), never at every client slot. */
#ifndef SB_TIMERS_H
#define SB_TIMERS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int64_t *at; /* per id: its deadline while armed */
    int *slot;   /* per id: its index in armed[], -1 = not armed */
    int *armed;  /* the armed ids */
    int count;
    int cap;
} sb_timers;

/* Returns 0 or STDIO_BUS_ERR (out of memory). */
int sb_timers_init(sb_timers *t, int cap);
void sb_timers_fini(sb_timers *t);

/* Arms timer id to expire at `at` (ms), replacing its deadline if armed. */
void sb_timers_arm(sb_timers *t, int id, int64_t at);
void sb_timers_disarm(sb_timers *t, int id);
static inline bool sb_timers_armed(const sb_timers *t, int id) {
    return id < t->cap && t->slot[id] >= 0;
}
/* Timer id's deadline, or 0 when it is not armed. */
int64_t sb_timers_deadline(const sb_timers *t, int id);

/* The earliest deadline armed, or INT64_MAX when none is. */
int64_t sb_timers_next(const sb_timers *t);

/* Disarms and returns the timer due at `now` (deadline <= now) with the
 * earliest deadline (the lower id first on a tie), or STDIO_BUS_EAGAIN
 * when none is due. */
int sb_timers_take(sb_timers *t, int64_t now);

#endif
