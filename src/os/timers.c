#include "timers.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

int sb_timers_init(sb_timers *t, int cap) {
    memset(t, 0, sizeof *t);
    t->at = calloc((size_t)cap, sizeof *t->at);
    t->slot = malloc((size_t)cap * sizeof *t->slot);
    t->armed = malloc((size_t)cap * sizeof *t->armed);
    if (!t->at || !t->slot || !t->armed) {
        sb_timers_fini(t);
        return STDIO_BUS_ERR;
    }
    for (int i = 0; i < cap; i++)
        t->slot[i] = -1;
    t->cap = cap;
    return STDIO_BUS_OK;
}

void sb_timers_fini(sb_timers *t) {
    free(t->at);
    free(t->slot);
    free(t->armed);
    memset(t, 0, sizeof *t);
}

void sb_timers_arm(sb_timers *t, int id, int64_t at) {
    if (id >= t->cap)
        return; /* a set that could not be allocated: nothing to arm */
    if (t->slot[id] < 0) {
        t->slot[id] = t->count;
        t->armed[t->count++] = id;
    }
    t->at[id] = at;
}

void sb_timers_disarm(sb_timers *t, int id) {
    if (id >= t->cap)
        return;
    int s = t->slot[id];
    if (s < 0)
        return;
    int last = t->armed[--t->count];
    t->armed[s] = last;
    t->slot[last] = s;
    t->slot[id] = -1;
}

int64_t sb_timers_deadline(const sb_timers *t, int id) {
    return sb_timers_armed(t, id) ? t->at[id] : 0;
}

int64_t sb_timers_next(const sb_timers *t) {
    int64_t next = INT64_MAX;
    for (int i = 0; i < t->count; i++)
        if (t->at[t->armed[i]] < next)
            next = t->at[t->armed[i]];
    return next;
}

int sb_timers_take(sb_timers *t, int64_t now) {
    int best = -1;
    for (int i = 0; i < t->count; i++) {
        int id = t->armed[i];
        if (t->at[id] <= now &&
            (best < 0 || t->at[id] < t->at[best] || (t->at[id] == t->at[best] && id < best)))
            best = id;
    }
    if (best < 0)
        return STDIO_BUS_EAGAIN;
    sb_timers_disarm(t, best);
    return best;
}
