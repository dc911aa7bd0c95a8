/* Output queue (see out.h). */
#include "out.h"

#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "common/stdio.h"

struct mw_unit {
    mw_unit *next;
    char *data; /* owned */
    size_t len;
    size_t off;       /* bytes written so far */
    size_t pieces;    /* 1..len */
    size_t piece;     /* index of the piece being written */
    int64_t pause_ns; /* between pieces */
    int64_t ready_at; /* the current piece may not start before this */
};

void mw_out_init(mw_out *o, int fd, const mw_log *log, size_t coalesce) {
    memset(o, 0, sizeof *o);
    o->fd = fd;
    o->log = log;
    o->coalesce = coalesce;
    mc_buf_init(&o->held);
}

static void free_units(mw_out *o) {
    while (o->head) {
        mw_unit *u = o->head;
        o->head = u->next;
        free(u->data);
        free(u);
    }
    o->tail = NULL;
    o->queued = 0;
}

void mw_out_fini(mw_out *o) {
    free_units(o);
    mc_buf_fini(&o->held);
}

/* Takes ownership of data. */
static void push_unit(mw_out *o, char *data, size_t len, long pieces, int64_t pause_ns) {
    if (o->stalled || len == 0) {
        free(data);
        return;
    }
    mw_unit *u = mc_xmalloc(sizeof *u);
    memset(u, 0, sizeof *u);
    u->data = data;
    u->len = len;
    u->pieces = pieces < 1 ? 1 : (size_t)pieces;
    if (u->pieces > len)
        u->pieces = len;
    u->pause_ns = pause_ns;
    if (o->tail)
        o->tail->next = u;
    else
        o->head = u;
    o->tail = u;
    o->queued += len;
}

void mw_out_release(mw_out *o) {
    if (o->held.len == 0)
        return;
    size_t len;
    char *data = mc_buf_take(&o->held, &len);
    o->held_lines = 0;
    push_unit(o, data, len, 1, 0);
}

void mw_out_line(mw_out *o, const char *p, size_t n) {
    if (o->stalled)
        return;
    if (o->coalesce > 1) {
        mc_buf_append(&o->held, p, n);
        mc_buf_append(&o->held, "\n", 1);
        if (++o->held_lines >= o->coalesce)
            mw_out_release(o);
        return;
    }
    mw_out_bytes(o, p, n, 1, 0, true);
}

void mw_out_bytes(mw_out *o, const char *p, size_t n, long pieces, int64_t pause_ns, bool newline) {
    if (o->stalled)
        return;
    mw_out_release(o); /* keep the stream in order */
    char *data = mc_xmalloc(n + 1);
    memcpy(data, p, n);
    if (newline)
        data[n++] = '\n';
    push_unit(o, data, n, pieces, pause_ns);
}

void mw_out_stall(mw_out *o) {
    /* What was queued before the stall still goes out: whether it had been
     * written yet depends only on how the input was chunked. */
    mw_out_release(o);
    o->stalled = true;
}

/* One `out` record per line of a fully written unit. */
static void log_unit(const mw_out *o, const mw_unit *u) {
    size_t start = 0;
    while (start < u->len) {
        const char *nl = memchr(u->data + start, '\n', u->len - start);
        size_t end = nl ? (size_t)(nl - u->data) : u->len;
        mw_log_record(o->log, "out", u->data + start, end - start);
        start = nl ? end + 1 : end;
    }
}

static size_t piece_end(const mw_unit *u) {
    return (u->piece + 1) * u->len / u->pieces;
}

int mw_out_write(mw_out *o, int64_t now) {
    while (o->head) {
        mw_unit *u = o->head;
        if (u->ready_at > now)
            return MC_OK;
        size_t end = piece_end(u);
        ssize_t r = mc_stdio_write(o->fd, u->data + u->off, end - u->off);
        if (r < 0)
            return (int)r; /* MC_EOF: the reader is gone */
        if (r == 0)
            return MC_OK; /* the pipe is full: POLLOUT */
        u->off += (size_t)r;
        o->queued -= (size_t)r;
        if (u->off < end)
            continue; /* the pipe took part of it; the next call says EAGAIN */
        if (u->off < u->len) {
            u->piece++;
            u->ready_at = now + u->pause_ns;
            continue;
        }
        log_unit(o, u);
        o->head = u->next;
        if (!o->head)
            o->tail = NULL;
        free(u->data);
        free(u);
    }
    return MC_OK;
}

size_t mw_out_queued(const mw_out *o) {
    return o->queued;
}

bool mw_out_wants_pollout(const mw_out *o, int64_t now) {
    return o->head && o->head->ready_at <= now;
}

int64_t mw_out_deadline(const mw_out *o, int64_t now) {
    return o->head && o->head->ready_at > now ? o->head->ready_at : 0;
}
