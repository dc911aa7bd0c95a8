/* Unit tests for NDJSON framing (src/base/frame.c; spec 2.2, 4.2.1, 7.3.2). */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "status.h"

/* Lines collected from a frame, joined with '|' after each one (the lines
 * keep their own '\n'), plus how feeding ended. */
typedef struct {
    char text[8192];
    size_t len;
    size_t count;
    int full; /* EFULL was reported */
} collected;

static void drain(sb_frame *f, collected *c) {
    const char *line;
    long n;

    while ((n = sb_frame_next(f, &line)) > 0) {
        cr_assert(c->len + (size_t)n + 1 <= sizeof c->text);
        cr_assert_eq(line[n - 1], '\n');
        cr_assert_null(memchr(line, '\n', (size_t)n - 1));
        memcpy(c->text + c->len, line, (size_t)n);
        c->len += (size_t)n;
        c->text[c->len++] = '|';
        c->count++;
    }
    if (n == STDIO_BUS_EFULL)
        c->full = 1;
    else
        cr_assert_eq(n, STDIO_BUS_EAGAIN);
}

/* Feeds s[0..n) as a read of exactly those bytes (possibly split over
 * several sb_frame_space calls when the space offered is smaller), then
 * drains the complete lines. */
static void feed(sb_frame *f, const char *s, size_t n, collected *c) {
    while (n > 0 && !c->full) {
        size_t avail;
        char *p = sb_frame_space(f, &avail);
        if (p == NULL) {
            cr_assert_eq(avail, 0);
            drain(f, c);
            cr_assert(c->full, "space refused while no overflow");
            return;
        }
        cr_assert_gt(avail, 0);
        cr_assert_leq(f->cap, f->max);
        size_t k = n < avail ? n : avail;
        memcpy(p, s, k);
        sb_frame_commit(f, k);
        s += k;
        n -= k;
        drain(f, c);
    }
}

static void feed_str(sb_frame *f, const char *s, collected *c) {
    feed(f, s, strlen(s), c);
}

static void expect_text(const collected *c, const char *want) {
    cr_assert_eq(c->len, strlen(want), "got %.*s, want %s", (int)c->len, c->text, want);
    cr_assert(memcmp(c->text, want, c->len) == 0, "got %.*s, want %s", (int)c->len, c->text, want);
}

Test(frame, a_new_frame_allocates_nothing_and_has_no_line) {
    sb_frame f;
    const char *line;
    sb_frame_init(&f, 1024);
    cr_expect_null(f.data);
    cr_expect_eq(sb_frame_pending(&f), 0);
    cr_expect_eq(sb_frame_next(&f, &line), STDIO_BUS_EAGAIN);
    sb_frame_shrink(&f);
    sb_frame_fini(&f);
}

Test(frame, partial_line_returns_eagain) {
    sb_frame f;
    collected c = {0};
    sb_frame_init(&f, 1024);
    feed_str(&f, "{\"id\":1", &c);
    cr_expect_eq(c.count, 0);
    cr_expect_eq(sb_frame_pending(&f), 7);
    feed_str(&f, "}\n", &c);
    expect_text(&c, "{\"id\":1}\n|");
    cr_expect_eq(sb_frame_pending(&f), 0);
    sb_frame_fini(&f);
}

/* What a close discards: complete lines given back or not reached (held,
 * SB-I-45) are told apart from the partial line after them (SB-I-25). */
Test(frame, unreturned_lines_and_the_partial_line_are_counted_apart) {
    sb_frame f;
    size_t partial = 99;
    sb_frame_init(&f, 1024);
    cr_expect_eq(sb_frame_unreturned_lines(&f, &partial), 0);
    cr_expect_eq(partial, 0);
    size_t avail;
    char *p = sb_frame_space(&f, &avail);
    const char *bytes = "one\ntwo\n\nthr";
    memcpy(p, bytes, strlen(bytes));
    sb_frame_commit(&f, strlen(bytes));
    const char *line;
    long n = sb_frame_next(&f, &line);
    cr_assert_eq(n, 4);
    sb_frame_unread(&f, (size_t)n); /* held: not routed yet */
    cr_expect_eq(sb_frame_unreturned_lines(&f, &partial), 3);
    cr_expect_eq(partial, 3);
    while (sb_frame_next(&f, &line) > 0)
        ;
    cr_expect_eq(sb_frame_unreturned_lines(&f, &partial), 0);
    cr_expect_eq(partial, 3, "only the partial line is left");
    sb_frame_fini(&f);
}

Test(frame, many_lines_in_one_read_come_out_in_order) {
    sb_frame f;
    collected c = {0};
    sb_frame_init(&f, 1024);
    feed_str(&f, "a\nbb\n\nccc\r\nd", &c);
    expect_text(&c, "a\n|bb\n|\n|ccc\r\n|");
    cr_expect_eq(c.count, 4);
    cr_expect_eq(sb_frame_pending(&f), 1);
    feed_str(&f, "\n", &c);
    expect_text(&c, "a\n|bb\n|\n|ccc\r\n|d\n|");
    sb_frame_fini(&f);
}

Test(frame, crlf_is_passed_through_unchanged) {
    sb_frame f;
    collected c = {0};
    sb_frame_init(&f, 64);
    feed_str(&f, "{}\r", &c);
    cr_expect_eq(c.count, 0);
    feed_str(&f, "\n{}\r\n", &c);
    expect_text(&c, "{}\r\n|{}\r\n|");
    sb_frame_fini(&f);
}

Test(frame, lines_split_at_every_byte_position_are_reassembled) {
    static const char text[] = "{\"id\":1}\n\n{\"method\":\"x\"}\r\nlonger line of text\nz\n";
    const size_t n = sizeof text - 1;
    const char *want = "{\"id\":1}\n|\n|{\"method\":\"x\"}\r\n|longer line of text\n|z\n|";

    for (size_t i = 0; i <= n; i++) {
        for (size_t j = i; j <= n; j++) {
            sb_frame f;
            collected c = {0};
            sb_frame_init(&f, 64);
            feed(&f, text, i, &c);
            feed(&f, text + i, j - i, &c);
            feed(&f, text + j, n - j, &c);
            expect_text(&c, want);
            cr_expect_eq(sb_frame_pending(&f), 0);
            sb_frame_fini(&f);
        }
    }
}

Test(frame, one_byte_reads_scan_each_byte_once) {
    sb_frame f;
    collected c = {0};
    sb_frame_init(&f, 1 << 20);
    for (int i = 0; i < 5000; i++) {
        feed(&f, "x", 1, &c);
        /* Everything buffered has been looked at and is known to hold no
         * '\n': the next call starts after it. */
        cr_assert_eq(f.scanned, (size_t)i + 1);
    }
    feed(&f, "\n", 1, &c);
    cr_expect_eq(c.count, 1);
    cr_expect_eq(c.len, 5002);
    cr_expect_eq(f.scanned, 0);
    sb_frame_fini(&f);
}

Test(frame, a_line_of_exactly_max_bytes_is_accepted) {
    enum { MAX = 100 };
    char line[MAX];
    memset(line, 'x', MAX - 1);
    line[MAX - 1] = '\n';

    /* In one read, in two, and byte by byte. */
    for (size_t chunk = 1; chunk <= MAX; chunk++) {
        sb_frame f;
        collected c = {0};
        sb_frame_init(&f, MAX);
        for (size_t off = 0; off < MAX; off += chunk)
            feed(&f, line + off, off + chunk <= MAX ? chunk : MAX - off, &c);
        cr_assert_eq(c.count, 1, "chunk %zu", chunk);
        cr_assert_eq(c.full, 0);
        cr_assert_eq(c.len, MAX + 1);
        sb_frame_fini(&f);
    }
}

Test(frame, a_line_of_max_plus_one_bytes_is_efull) {
    enum { MAX = 100 };
    char line[MAX + 1];
    memset(line, 'x', MAX);
    line[MAX] = '\n';

    for (size_t chunk = 1; chunk <= MAX + 1; chunk++) {
        sb_frame f;
        collected c = {0};
        const char *out;
        size_t avail;
        sb_frame_init(&f, MAX);
        for (size_t off = 0; off <= MAX && !c.full; off += chunk)
            feed(&f, line + off, off + chunk <= MAX + 1 ? chunk : MAX + 1 - off, &c);
        cr_assert(c.full, "chunk %zu", chunk);
        cr_assert_eq(c.count, 0);
        /* It stays full: no more space, the same verdict again. */
        cr_expect_eq(sb_frame_next(&f, &out), STDIO_BUS_EFULL);
        cr_expect_null(sb_frame_space(&f, &avail));
        cr_expect_eq(avail, 0);
        cr_expect_eq(sb_frame_pending(&f), MAX);
        sb_frame_fini(&f);
    }
}

Test(frame, overflow_is_reported_once_max_bytes_are_buffered_not_later) {
    /* SB-7.3.2: the daemon must not wait for a '\n' that may never come. */
    sb_frame f;
    collected c = {0};
    char buf[10];
    memset(buf, 'x', sizeof buf);
    sb_frame_init(&f, 10);
    feed(&f, buf, 9, &c);
    cr_expect_eq(c.full, 0);
    feed(&f, buf, 1, &c);
    cr_expect_eq(c.full, 1);
    sb_frame_fini(&f);
}

Test(frame, a_complete_line_before_an_overlong_one_is_still_returned) {
    sb_frame f;
    collected c = {0};
    sb_frame_init(&f, 8);
    feed_str(&f, "ab\ncdefghijk\n", &c);
    cr_expect_eq(c.count, 1);
    expect_text(&c, "ab\n|");
    cr_expect(c.full);
    sb_frame_fini(&f);
}

Test(frame, lines_that_fill_the_buffer_exactly_are_not_overflow) {
    /* The buffer holds max bytes of complete lines: they are lines. */
    sb_frame f;
    collected c = {0};
    sb_frame_init(&f, 8);
    feed_str(&f, "abc\ndef\n", &c);
    expect_text(&c, "abc\n|def\n|");
    cr_expect_eq(c.full, 0);
    feed_str(&f, "1234567\n12345678", &c);
    expect_text(&c, "abc\n|def\n|1234567\n|");
    cr_expect(c.full);
    sb_frame_fini(&f);
}

Test(frame, storage_grows_geometrically_and_never_beyond_max) {
    enum { MAX = 100000 };
    sb_frame f;
    size_t grows = 0, last_cap = 0;
    sb_frame_init(&f, MAX);
    for (;;) {
        size_t avail;
        char *p = sb_frame_space(&f, &avail);
        if (p == NULL)
            break;
        cr_assert_leq(f.cap, MAX);
        if (f.cap != last_cap) {
            cr_assert(f.cap >= 2 * last_cap || f.cap == MAX);
            last_cap = f.cap;
            grows++;
        }
        memset(p, 'x', avail);
        sb_frame_commit(&f, avail);
    }
    cr_expect_eq(f.cap, MAX);
    cr_expect_lt(grows, 10);
    const char *line;
    cr_expect_eq(sb_frame_next(&f, &line), STDIO_BUS_EFULL);
    sb_frame_fini(&f);
}

Test(frame, a_max_smaller_than_the_first_allocation_is_honoured) {
    sb_frame f;
    collected c = {0};
    size_t avail;
    sb_frame_init(&f, 3);
    cr_assert_not_null(sb_frame_space(&f, &avail));
    cr_expect_eq(avail, 3);
    feed_str(&f, "a\nbc\n", &c);
    expect_text(&c, "a\n|bc\n|");
    feed_str(&f, "def\n", &c);
    cr_expect(c.full);
    sb_frame_fini(&f);
}

Test(frame, one_mebibyte_default_line_fits) {
    enum { MAX = 1048576 };
    char *big = malloc(MAX);
    sb_frame f;
    const char *line;
    long n = 0;
    memset(big, 'x', MAX - 1);
    big[MAX - 1] = '\n';
    sb_frame_init(&f, MAX);
    for (size_t off = 0; off < MAX;) {
        size_t avail;
        char *p = sb_frame_space(&f, &avail);
        cr_assert_not_null(p);
        size_t k = MAX - off < avail ? MAX - off : avail;
        memcpy(p, big + off, k);
        sb_frame_commit(&f, k);
        off += k;
        n = sb_frame_next(&f, &line);
        if (off < MAX)
            cr_assert_eq(n, STDIO_BUS_EAGAIN);
    }
    cr_assert_eq(n, MAX);
    cr_assert(memcmp(line, big, MAX) == 0);
    free(big);
    sb_frame_fini(&f);
}

Test(frame, shrink_releases_storage_only_when_nothing_is_pending) {
    sb_frame f;
    collected c = {0};
    sb_frame_init(&f, 1 << 20);
    feed_str(&f, "abc\nde", &c);
    sb_frame_shrink(&f);
    cr_expect_not_null(f.data, "shrink dropped buffered bytes");
    cr_expect_eq(sb_frame_pending(&f), 2);
    feed_str(&f, "\n", &c);
    expect_text(&c, "abc\n|de\n|");
    sb_frame_shrink(&f);
    cr_expect_null(f.data);
    cr_expect_eq(f.cap, 0);
    cr_expect_eq(f.max, 1 << 20);
    /* And it still works afterwards. */
    feed_str(&f, "fg\n", &c);
    expect_text(&c, "abc\n|de\n|fg\n|");
    sb_frame_fini(&f);
}

Test(frame, fini_then_init_again) {
    sb_frame f;
    collected c = {0};
    sb_frame_init(&f, 16);
    feed_str(&f, "partial", &c);
    sb_frame_fini(&f);
    cr_expect_null(f.data);
    sb_frame_init(&f, 16);
    feed_str(&f, "x\n", &c);
    expect_text(&c, "x\n|");
    sb_frame_fini(&f);
}

Test(frame, lines_point_into_the_buffer_without_copying) {
    sb_frame f;
    const char *a, *b;
    size_t avail;
    sb_frame_init(&f, 64);
    char *p = sb_frame_space(&f, &avail);
    memcpy(p, "a\nb\n", 4);
    sb_frame_commit(&f, 4);
    cr_assert_eq(sb_frame_next(&f, &a), 2);
    cr_assert_eq(sb_frame_next(&f, &b), 2);
    cr_expect_eq(a, p);
    cr_expect_eq(b, p + 2);
    sb_frame_fini(&f);
}

Test(frame, a_zero_length_read_changes_nothing) {
    sb_frame f;
    collected c = {0};
    sb_frame_init(&f, 64);
    feed_str(&f, "ab", &c);
    size_t avail;
    cr_assert_not_null(sb_frame_space(&f, &avail));
    sb_frame_commit(&f, 0);
    drain(&f, &c);
    cr_expect_eq(c.count, 0);
    cr_expect_eq(sb_frame_pending(&f), 2);
    sb_frame_fini(&f);
}

/* A peer whose reads fill all the space offered is busy: its storage grows
 * (to 64 KiB) even though every line in it was complete, so one read can
 * take many lines. A peer whose reads leave room keeps the first size. */
static size_t cap_after_reads(size_t line_len, size_t read_len, int rounds) {
    sb_frame f;
    size_t at = 0; /* position in the endless stream of lines */
    char *line = malloc(line_len);
    cr_assert_not_null(line);
    memset(line, 'x', line_len - 1);
    line[line_len - 1] = '\n';
    sb_frame_init(&f, 1048576);
    for (int i = 0; i < rounds; i++) {
        size_t avail;
        char *p = sb_frame_space(&f, &avail);
        cr_assert_not_null(p);
        size_t k = read_len < avail ? read_len : avail;
        for (size_t j = 0; j < k; j++, at++)
            p[j] = line[at % line_len];
        sb_frame_commit(&f, k);
        const char *l;
        while (sb_frame_next(&f, &l) > 0)
            ;
    }
    size_t cap = f.cap;
    sb_frame_fini(&f);
    free(line);
    return cap;
}

Test(frame, a_busy_peer_gets_larger_reads_up_to_64_kib) {
    cr_expect_eq(cap_after_reads(4096, (size_t)-1, 10), 65536);
    cr_expect_eq(cap_after_reads(100, (size_t)-1, 10), 65536);
}

Test(frame, a_peer_whose_reads_leave_room_keeps_the_first_size) {
    cr_expect_eq(cap_after_reads(100, 1000, 50), 4096);
}
