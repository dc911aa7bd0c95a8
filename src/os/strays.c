#include "strays.h"
#include "status.h"

#include <stdbool.h>

int sb_strays_parse(const char *text, size_t len, pid_t *out, int cap) {
    int n = 0;
    size_t i = 0;
    while (i < len) {
        long v = 0;
        size_t start = i;
        while (i < len && text[i] >= '0' && text[i] <= '9' && v <= 1L << 30)
            v = v * 10 + (text[i++] - '0');
        if (i == len)
            break; /* cut short: the next look reads it whole */
        if (i == start || text[i] != ' ' || v <= 0 || v > 1L << 30)
            return STDIO_BUS_ERR;
        i++;
        if (n == cap)
            return STDIO_BUS_EFULL;
        out[n++] = (pid_t)v;
    }
    return n;
}

static bool is_worker(pid_t pid, const pid_t *workers, int nw) {
    for (int i = 0; i < nw; i++)
        if (workers[i] == pid)
            return true;
    return false;
}

int sb_strays_doomed(sb_stray *kids, int n, const pid_t *workers, int nw, int *strays) {
    int kept = 0;
    *strays = 0;
    for (int i = 0; i < n; i++) {
        if (is_worker(kids[i].pid, workers, nw))
            continue;
        ++*strays;
        if (!is_worker(kids[i].pgid, workers, nw)) /* SB-X-18 ends the rest with its worker */
            kids[kept++] = kids[i];
    }
    return kept;
}
