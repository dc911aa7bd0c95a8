/* Fuzz target: sb_frame against a trivial reference (split on '\n').
 *
 * Input layout: byte 0-1 choose max, byte 2 chooses flags, bytes 3-6 are
 * four read sizes used in turn (0 = as much as offered); the rest is the
 * stream. The stream is fed through sb_frame_space/commit in those reads,
 * draining lines after each, and must come out as the same lines in order,
 * ending in STDIO_BUS_EFULL exactly when the reference has a line longer
 * than max (or a final unterminated piece of max bytes or more). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEADER 7

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "frame_fuzzer: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The reference: where the next expected line starts in the stream, and
 * what happens there. */
typedef struct {
    const uint8_t *s;
    size_t n;
    size_t max;
    size_t next; /* offset of the next line not yet returned */
} reference;

/* Length (with '\n') of the line at r->next, or 0 if it has no '\n'. */
static size_t ref_line(const reference *r) {
    const uint8_t *nl = memchr(r->s + r->next, '\n', r->n - r->next);
    return nl != NULL ? (size_t)(nl - (r->s + r->next)) + 1 : 0;
}

/* Whether the reference says the stream overflows at r->next, given that
 * `fed` bytes of it have been read so far. */
static int ref_overflows(const reference *r, size_t fed) {
    size_t len = ref_line(r);
    if (len > 0)
        return len > r->max && fed - r->next >= r->max;
    return r->n - r->next >= r->max && fed - r->next >= r->max;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sb_frame f;
    reference r;
    size_t reads[4];
    size_t fed = 0, turn = 0;
    int flags, full = 0;

    if (size < HEADER)
        return 0;
    /* Mostly small limits, so lines hit them; sometimes up to 32 KiB, past
     * the first allocation, so growth is exercised too. */
    if (data[1] & 0x80)
        r.max = 1 + ((size_t)data[0] | ((size_t)(data[1] & 0x7f) << 8));
    else
        r.max = 1 + data[0] % 64;
    flags = data[2];
    for (int i = 0; i < 4; i++)
        reads[i] = data[3 + i];
    r.s = data + HEADER;
    r.n = size - HEADER;
    r.next = 0;

    sb_frame_init(&f, r.max);
    while (!full) {
        size_t avail, want, k;
        char *p;
        const char *line;
        long got;

        /* Drain: every complete line the reference holds within what has
         * been fed comes out, then EAGAIN or EFULL as the reference says. */
        while ((got = sb_frame_next(&f, &line)) > 0) {
            size_t len = ref_line(&r);
            CHECK(len > 0 && r.next + len <= fed);
            CHECK(len <= r.max);
            CHECK((size_t)got == len);
            CHECK(memcmp(line, r.s + r.next, len) == 0);
            r.next += len;
        }
        CHECK(f.start <= f.len && f.len <= f.cap && f.cap <= f.max);
        CHECK(f.scanned == f.len - f.start);
        CHECK(sb_frame_pending(&f) == fed - r.next);
        if (got == STDIO_BUS_EFULL) {
            CHECK(ref_overflows(&r, fed));
            CHECK(sb_frame_pending(&f) == r.max);
            full = 1;
            break;
        }
        CHECK(got == STDIO_BUS_EAGAIN);
        /* No complete line is left in what was fed. */
        CHECK(ref_line(&r) == 0 || r.next + ref_line(&r) > fed);
        CHECK(!ref_overflows(&r, fed));
        if (fed == r.n)
            break;

        if ((flags & 1) && sb_frame_pending(&f) == 0) {
            sb_frame_shrink(&f);
            CHECK(f.data == NULL);
        }
        p = sb_frame_space(&f, &avail);
        /* After EAGAIN the partial line is shorter than max: room exists. */
        CHECK(p != NULL && avail > 0);
        want = reads[turn++ % 4];
        if (want == 0 || want > avail)
            want = avail;
        k = r.n - fed < want ? r.n - fed : want;
        memcpy(p, r.s + fed, k);
        sb_frame_commit(&f, k);
        fed += k;
    }
    if (!full) {
        /* All read: what is left is the reference's final partial line. */
        CHECK(fed == r.n);
        CHECK(ref_line(&r) == 0);
        CHECK(r.n - r.next < r.max);
    } else {
        size_t avail;
        CHECK(sb_frame_space(&f, &avail) == NULL && avail == 0);
    }
    sb_frame_fini(&f);
    CHECK(f.data == NULL);
    return 0;
}
