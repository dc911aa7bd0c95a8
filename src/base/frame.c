/* NDJSON framing (spec 2.2, 4.2.1, 7.3.2); see frame.h for the contract.
 *
 * Invariants: start <= len <= cap <= max, and data[start .. start+scanned)
 * holds no '\n'. Because the storage never exceeds max bytes, a complete
 * line can never be longer than max, and a partial line that fills max
 * bytes can only be completed by a line of max + 1 or more: that is the
 * overflow of SB-7.3.2. */
#include "frame.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

/* First allocation: large enough for typical JSON-RPC messages in one read,
 * small enough that many idle-but-used connections stay cheap. */
#define SB_FRAME_MIN_CAP 4096

void sb_frame_init(sb_frame *f, size_t max) {
    f->data = NULL;
    f->start = 0;
    f->scanned = 0;
    f->len = 0;
    f->cap = 0;
    f->max = max;
    f->filled = 0;
    f->ahead = 0;
}

void sb_frame_fini(sb_frame *f) {
    free(f->data);
    sb_frame_init(f, f->max);
}

char *sb_frame_space(sb_frame *f, size_t *avail) {
    /* Slide the unread bytes to the front. Each byte moves at most once:
     * after the move it sits at or after start, and only bytes behind
     * lines already returned get moved. */
    if (f->start > 0) {
        f->ahead = f->ahead > f->start ? f->ahead - f->start : 0;
        f->len -= f->start;
        if (f->len > 0)
            memmove(f->data, f->data + f->start, f->len);
        f->start = 0;
    }
    if (f->len == f->cap || (f->filled && f->cap < SB_FRAME_BUSY_CAP && f->cap < f->max)) {
        size_t cap;
        char *data;

        if (f->cap >= f->max) {
            /* max bytes buffered and unreturned: the caller must drain
             * lines with sb_frame_next first; if none is complete this is
             * the overflow sb_frame_next reports as EFULL. */
            *avail = 0;
            return NULL;
        }
        cap = f->cap < SB_FRAME_MIN_CAP / 2 ? SB_FRAME_MIN_CAP : f->cap * 2;
        if (cap > f->max || cap < f->cap) /* cap < f->cap: overflow */
            cap = f->max;
        data = realloc(f->data, cap);
        if (data == NULL) {
            errno = ENOMEM;
            *avail = 0;
            return NULL;
        }
        f->data = data;
        f->cap = cap;
        f->filled = 0;
    }
    *avail = f->cap - f->len;
    return f->data + f->len;
}

void sb_frame_commit(sb_frame *f, size_t n) {
    assert(n <= f->cap - f->len);
    f->filled = n == f->cap - f->len;
    f->len += n;
}

long sb_frame_next(sb_frame *f, const char **line) {
    size_t pending = f->len - f->start;

    if (f->scanned < pending) {
        const char *nl = memchr(f->data + f->start + f->scanned, '\n', pending - f->scanned);
        if (nl != NULL) {
            size_t n = (size_t)(nl - (f->data + f->start)) + 1;
            *line = f->data + f->start;
            f->start += n;
            f->scanned = 0;
            return (long)n;
        }
        f->scanned = pending; /* never look at these bytes again */
    }
    /* SB-7.3.2: a line (with its '\n') may take at most max bytes. */
    if (pending > 0 && pending >= f->max)
        return STDIO_BUS_EFULL;
    return STDIO_BUS_EAGAIN;
}

void sb_frame_unread(sb_frame *f, size_t n) {
    assert(n <= f->start);
    f->start -= n;
    f->scanned = 0;
}

/* f->ahead is an offset in data like start, so returning lines does not
 * move it; it means nothing once start has passed it. */
void sb_frame_hold(sb_frame *f, size_t n) {
    if (f->ahead < f->start + n)
        f->ahead = f->start + n;
}

long sb_frame_peek(const sb_frame *f, const char **line) {
    if (f->ahead <= f->start || f->ahead >= f->len)
        return STDIO_BUS_EAGAIN;
    const char *nl = memchr(f->data + f->ahead, '\n', f->len - f->ahead);
    if (!nl)
        return STDIO_BUS_EAGAIN;
    *line = f->data + f->ahead;
    return (long)(nl - *line) + 1;
}

void sb_frame_pass(sb_frame *f, size_t n) {
    f->ahead += n;
}

void sb_frame_cut(sb_frame *f, size_t n) {
    assert(f->ahead + n <= f->len);
    memmove(f->data + f->ahead, f->data + f->ahead + n, f->len - f->ahead - n);
    f->len -= n;
    if (f->scanned > f->ahead - f->start)
        f->scanned = f->ahead - f->start;
}

size_t sb_frame_room(const sb_frame *f) {
    size_t held = f->len - f->start;
    return held < f->max ? f->max - held : 0;
}

size_t sb_frame_pending(const sb_frame *f) {
    return f->len - f->start;
}

size_t sb_frame_unreturned_lines(const sb_frame *f, size_t *partial) {
    size_t lines = 0, at = f->start;
    const char *nl;
    while (at < f->len && (nl = memchr(f->data + at, '\n', f->len - at))) {
        lines++;
        at = (size_t)(nl - f->data) + 1;
    }
    *partial = f->len - at;
    return lines;
}

void sb_frame_shrink(sb_frame *f) {
    if (f->len - f->start > 0)
        return;
    free(f->data);
    sb_frame_init(f, f->max);
}
