/* Unit tests for the inline key compare of the session and pending tables
 * (src/base/hash.h, sb_bytes_equal: keys of up to 16 bytes are compared with two
 * overlapping loads each instead of a memcmp call). Each fast path is held
 * to memcmp, the general path, on near misses: keys of 0 to 33 bytes (every
 * branch and both sides of each of its boundaries) that differ from their
 * copy in one byte, at every position, by each of several replacement
 * bytes; and on keys that are equal but for the bytes around them, which
 * the loads must not reach. Every key ends at a PROT_NONE page, so a load
 * past its last byte crashes even without ASan. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hash.h"

/* Longer than the widest fast path (16) twice over, and past 32. */
#define MAX_KEY 33

/* Two keys, each ending exactly at a guard page (same page-offset, so the
 * loads of both are misaligned alike), and a page before it to start in. */
typedef struct {
    unsigned char *map;
    size_t page;
    unsigned char *a_end, *b_end; /* the guard pages */
} guarded_pair;

static guarded_pair pair;

static void setup(void) {
    pair.page = (size_t)sysconf(_SC_PAGESIZE);
    pair.map =
        mmap(NULL, 4 * pair.page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(pair.map != MAP_FAILED);
    pair.a_end = pair.map + pair.page;
    pair.b_end = pair.map + 3 * pair.page;
    cr_assert(mprotect(pair.a_end, pair.page, PROT_NONE) == 0);
    cr_assert(mprotect(pair.b_end, pair.page, PROT_NONE) == 0);
}

static void teardown(void) {
    munmap(pair.map, 4 * pair.page);
}

/* The replacement bytes of a near miss for an original byte c: its two
 * neighbours, then the bytes JSON treats specially and the extremes.
 * Returns how many were written (those equal to c are left out). */
static int near_misses(unsigned char c, unsigned char out[9]) {
    const unsigned char special[] = {'"', '\\', ' ', 0x01, 0x00, 0x80, 0xff};
    int n = 0;
    out[n++] = (unsigned char)(c - 1);
    out[n++] = (unsigned char)(c + 1);
    for (size_t i = 0; i < sizeof special; i++)
        if (special[i] != c)
            out[n++] = special[i];
    return n;
}

/* Keys as they reach the tables: a quoted id or sessionId, and bytes that
 * are not text at all (0x00 and 0xff runs test the loads' byte order and
 * sign, the counting pattern tells every position apart). */
static void fill_key(int pattern, unsigned char *k, size_t n) {
    static const char quoted[] = "\"sess-0123456789abcdefghijklmnopq\"";
    for (size_t i = 0; i < n; i++) {
        switch (pattern) {
        case 0:
            k[i] = (unsigned char)quoted[i % (sizeof quoted - 1)];
            break;
        case 1:
            k[i] = (unsigned char)(0x41 + i);
            break;
        case 2:
            k[i] = 0x00;
            break;
        default:
            k[i] = 0xff;
            break;
        }
    }
}
#define PATTERNS 4

Test(hash, bytes_equal_agrees_with_memcmp_on_keys_differing_in_one_byte_at_every_position,
     .init = setup, .fini = teardown) {
    long compared = 0;
    for (int pattern = 0; pattern < PATTERNS; pattern++) {
        for (size_t n = 0; n <= MAX_KEY; n++) {
            unsigned char *a = pair.a_end - n, *b = pair.b_end - n;
            fill_key(pattern, a, n);
            memcpy(b, a, n);
            cr_assert(sb_bytes_equal(a, b, n),
                      "keys of %zu equal bytes (pattern %d) compare unequal", n, pattern);
            for (size_t pos = 0; pos < n; pos++) {
                unsigned char repl[9];
                int nr = near_misses(a[pos], repl);
                for (int r = 0; r < nr; r++) {
                    b[pos] = repl[r];
                    int want = memcmp(a, b, n) == 0;
                    cr_assert_eq(sb_bytes_equal(a, b, n), want,
                                 "length %zu, pattern %d, byte %zu 0x%02x vs 0x%02x: "
                                 "sb_bytes_equal says %s, memcmp %s",
                                 n, pattern, pos, a[pos], b[pos], want ? "unequal" : "equal",
                                 want ? "equal" : "unequal");
                    cr_assert_eq(sb_bytes_equal(b, a, n), want,
                                 "length %zu, pattern %d, byte %zu: not symmetric", n, pattern,
                                 pos);
                    compared += 2;
                }
                b[pos] = a[pos];
            }
        }
    }
    cr_assert_gt(compared, 0);
}

/* Equal keys whose neighbours differ: the loads stay within [0, n), so the
 * bytes before and after a key (here the previous fields of an entry, and
 * whatever follows a token in the line) never make two keys unequal. The
 * key is also moved across every alignment. */
Test(hash, bytes_equal_looks_at_no_byte_outside_the_key, .init = setup, .fini = teardown) {
    for (size_t n = 0; n <= MAX_KEY; n++) {
        for (size_t shift = 0; shift < 8; shift++) {
            /* key then `shift` bytes that differ, then the guard page */
            unsigned char *a = pair.a_end - n - shift, *b = pair.b_end - n - shift;
            memset(a - 16, 0xaa, 16);
            memset(b - 16, 0x55, 16);
            fill_key(0, a, n);
            memcpy(b, a, n);
            memset(a + n, 0x11, shift);
            memset(b + n, 0xee, shift);
            cr_assert(sb_bytes_equal(a, b, n),
                      "keys of %zu equal bytes compare unequal when the %zu bytes after them "
                      "differ",
                      n, shift);
        }
    }
}
