/* Notification flood (see flood.h). */
#include "flood.h"

#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

#define FLOOD_QUEUE_CAP 65536

void mw_flood_init(mw_flood *f) {
    memset(f, 0, sizeof *f);
}

void mw_flood_fini(mw_flood *f) {
    free(f->sid_json);
    memset(f, 0, sizeof *f);
}

void mw_flood_start(mw_flood *f, double rate, long count, const char *sid_json, int64_t now) {
    mw_flood_fini(f);
    f->active = true;
    f->rate = rate;
    f->count = count;
    f->start = now;
    f->sid_json = sid_json ? mc_xstrndup(sid_json, strlen(sid_json)) : NULL;
}

void mw_flood_stop(mw_flood *f) {
    f->active = false;
}

/* Absolute schedule from the start, so late wake-ups do not drift. */
static int64_t due_at(const mw_flood *f) {
    if (f->rate <= 0)
        return f->start;
    return f->start + (int64_t)((double)f->sent * 1e9 / f->rate);
}

void mw_flood_tick(mw_flood *f, mw_out *out, int64_t now) {
    mc_buf b;
    mc_buf_init(&b);
    while (f->active && due_at(f) <= now && mw_out_queued(out) < FLOOD_QUEUE_CAP && !out->stalled) {
        b.len = 0;
        mc_buf_printf(&b,
                      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
                      "\"params\":{\"seq\":%ld}",
                      f->sent + 1);
        if (f->sid_json)
            mc_buf_printf(&b, ",\"sessionId\":%s", f->sid_json);
        mc_buf_puts(&b, "}");
        mw_out_line(out, b.data, b.len);
        if (++f->sent == f->count)
            f->active = false;
    }
    mc_buf_fini(&b);
}

int64_t mw_flood_deadline(const mw_flood *f, const mw_out *out, int64_t now) {
    if (!f->active || out->stalled || mw_out_queued(out) >= FLOOD_QUEUE_CAP)
        return 0;
    int64_t d = due_at(f);
    return d > now ? d : now;
}
