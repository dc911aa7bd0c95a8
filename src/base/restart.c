#include "restart.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

int sb_restart_init(sb_restart_history *h, int max_restarts) {
    memset(h, 0, sizeof *h);
    if (max_restarts <= 0)
        return STDIO_BUS_OK;
    h->times = malloc((size_t)max_restarts * sizeof *h->times);
    if (!h->times)
        return STDIO_BUS_ERR;
    h->cap = max_restarts;
    for (int i = 0; i < h->cap; i++)
        h->times[i] = INT64_MIN;
    return STDIO_BUS_OK;
}

void sb_restart_fini(sb_restart_history *h) {
    free(h->times);
    memset(h, 0, sizeof *h);
}

int sb_restart_recent(const sb_restart_history *h, const sb_limits *l, int64_t now_ms) {
    int64_t window_start = now_ms - (int64_t)l->restart_window_sec * 1000;
    int recent = 0;
    for (int i = 0; i < h->cap; i++)
        if (h->times[i] != INT64_MIN && h->times[i] > window_start)
            recent++;
    return recent;
}

long sb_restart_decide(sb_restart_history *h, const sb_limits *l, int64_t now_ms) {
    int recent = sb_restart_recent(h, l, now_ms);
    if (recent >= l->max_restarts)
        return STDIO_BUS_EFULL;
    /* The ring holds max_restarts entries and fewer than that are recent,
     * so the slot about to be overwritten is outside the window. Keep the
     * ring ordered by overwriting the oldest. */
    int oldest = 0;
    for (int i = 1; i < h->cap; i++)
        if (h->times[i] < h->times[oldest])
            oldest = i;
    h->times[oldest] = now_ms;
    long delay = l->restart_backoff_ms;
    for (int i = 0; i < recent && delay < l->restart_backoff_max_ms; i++)
        delay *= 2;
    return delay > l->restart_backoff_max_ms ? l->restart_backoff_max_ms : delay;
}
