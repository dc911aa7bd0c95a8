/* The building blocks of the routing-field scanner (fields.c, its only
 * includer): forced inlining, the end test of a padded or in-place scan,
 * word-at-a-time and SSE2 tests, \u escapes and the scan of a string's
 * body. Split from fields.c so that each file holds one level of the
 * scanner; every function is static and inlined into parse_core. */
#ifndef SB_FIELDS_SCAN_H
#define SB_FIELDS_SCAN_H

#include <stddef.h>
#include <stdint.h>

#if defined(__SSE2__) && !defined(SB_FIELDS_NO_SIMD)
#define SB_FIELDS_SSE2 1
#include <emmintrin.h>
#endif
/* Forces inlining, so that each caller of parse_core gets its own copy
 * with `padded` folded to a constant. */
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define NOINLINE      __attribute__((noinline))

/* Whether p is at the end of the input. Always false on a padded copy:
 * there the end holds a NUL, which every caller rejects as invalid. */
#define AT_END(p) (!padded && (p) == end)

/* Word-at-a-time tests (Hacker's Delight 6-1): each is non-zero exactly when
 * some byte of v is zero / below n (n <= 128). */
#define ONES           UINT64_C(0x0101010101010101)
#define HIGHS          UINT64_C(0x8080808080808080)
#define HAS_ZERO(v)    (((v)-ONES) & ~(v)&HIGHS)
#define HAS_LESS(v, n) (((v)-ONES * (n)) & ~(v)&HIGHS)

/* The value of one hex digit, or -1. */
static inline int hex_digit(unsigned c) {
    if (c - '0' < 10u)
        return (int)(c - '0');
    c |= 0x20; /* fold to lower case */
    if (c - 'a' < 6u)
        return (int)(c - 'a' + 10);
    return -1;
}

/* The code unit of the 4 hex digits at p, or -1 if fewer than 4 bytes
 * remain or one is not a hex digit. */
static inline long hex4(const unsigned char *p, const unsigned char *end) {
    long v = 0;
    if (end - p < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(p[i]);
        if (d < 0)
            return -1;
        v = (v << 4) | d;
    }
    return v;
}

/* Checks the escape whose backslash is at p[-1]; returns the byte after it,
 * or NULL if it is invalid. Escapes are rare, so this keeps its bounds
 * checks in both modes (they hold on the padded copy too). */
static const unsigned char *scan_escape(const unsigned char *p, const unsigned char *end) {
    long hi, lo;

    if (p == end)
        return NULL;
    switch (*p) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
        return p + 1;
    case 'u':
        hi = hex4(p + 1, end);
        if (hi < 0)
            return NULL;
        p += 5;
        if (hi >= 0xDC00 && hi <= 0xDFFF)
            return NULL; /* a low surrogate with no high one before it */
        if (hi < 0xD800 || hi > 0xDBFF)
            return p;
        /* A high surrogate: as in cJSON, its low half must follow at once. */
        if (end - p < 6 || p[0] != '\\' || p[1] != 'u')
            return NULL;
        lo = hex4(p + 2, end);
        if (lo < 0xDC00 || lo > 0xDFFF)
            return NULL;
        return p + 6;
    default:
        return NULL;
    }
}

/* The SSE2 string scan flags the bytes that end a run of plain string
 * bytes: '"', '\\' and those below 0x20. Flipping bit 1 maps '"' (0x22)
 * to 0x20, keeps 0x00-0x1f among themselves and sends every other byte
 * above 0x20 (0x20 to 0x22, 0x21 to 0x23), so one unsigned test,
 * "(v ^ 2) <= 0x20", finds a quote or a control byte, and it still holds
 * on the bytewise minimum of several blocks. A backslash is then
 * (v ^ 2) == ('\\' ^ 2). */
#ifdef SB_FIELDS_SSE2
typedef struct {
    __m128i flip;      /* 0x02 in every byte */
    __m128i max;       /* 0x20 in every byte */
    __m128i backslash; /* '\\' ^ 0x02 in every byte */
} scan_consts;

/* The empty asm hides the values from gcc, which would otherwise reload
 * each constant from memory at every string instead of keeping it in a
 * register for the whole line. */
static ALWAYS_INLINE scan_consts make_scan_consts(void) {
    scan_consts k = {_mm_set1_epi8(0x02), _mm_set1_epi8(0x20), _mm_set1_epi8('\\' ^ 0x02)};
    __asm__("" : "+x"(k.flip), "+x"(k.max), "+x"(k.backslash));
    return k;
}

/* 0xff in each byte of flipped that is <= 0x20. */
static ALWAYS_INLINE __m128i quote_or_control(__m128i flipped, const scan_consts *k) {
    return _mm_cmpeq_epi8(_mm_min_epu8(flipped, k->max), flipped);
}

static ALWAYS_INLINE __m128i load_flipped(const unsigned char *p, const scan_consts *k) {
    return _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)p), k->flip);
}

/* Bit i set when byte i of the 16 at p is a stop byte. */
static ALWAYS_INLINE unsigned stop_mask16(const unsigned char *p, const scan_consts *k) {
    __m128i v = load_flipped(p, k);
    __m128i stop = _mm_or_si128(quote_or_control(v, k), _mm_cmpeq_epi8(v, k->backslash));
    return (unsigned)_mm_movemask_epi8(stop);
}

/* Whether the 64 bytes at p hold a stop byte. The quote/control test is
 * done once, on the bytewise minimum of the four blocks. */
static ALWAYS_INLINE int has_stop64(const unsigned char *p, const scan_consts *k) {
    __m128i a = load_flipped(p, k), b = load_flipped(p + 16, k);
    __m128i c = load_flipped(p + 32, k), d = load_flipped(p + 48, k);
    __m128i low = _mm_min_epu8(_mm_min_epu8(a, b), _mm_min_epu8(c, d));
    __m128i bs = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(a, k->backslash), _mm_cmpeq_epi8(b, k->backslash)),
        _mm_or_si128(_mm_cmpeq_epi8(c, k->backslash), _mm_cmpeq_epi8(d, k->backslash)));
    return _mm_movemask_epi8(_mm_or_si128(quote_or_control(low, k), bs)) != 0;
}
#else
/* Without SSE2 the string scan needs no constants. */
typedef struct {
    int unused;
} scan_consts;

static ALWAYS_INLINE scan_consts make_scan_consts(void) {
    scan_consts k = {0};
    return k;
}
#endif

/* Scans a string body whose opening quote is at p[-1]. Returns the byte
 * after the closing quote, or NULL if the string is invalid or unterminated.
 * Sets *escaped when the body holds a backslash. On a padded copy
 * (`padded`) the NUL after the line stops every loop, so none checks the
 * end; each load starts at or before that NUL and reads at most 64 bytes. */
static ALWAYS_INLINE const unsigned char *scan_string(const unsigned char *p,
                                                      const unsigned char *end, int padded,
                                                      const scan_consts *k, int *escaped) {
    (void)k; /* unused without SSE2 */
    for (;;) {
        /* Most bytes of a message are string bodies: skip ordinary bytes
         * a block at a time, then find the stop byte within the block. */
#ifdef SB_FIELDS_SSE2
        if (padded || end - p >= 16) {
            unsigned m = stop_mask16(p, k);
            if (m) { /* most strings are short keys and values */
                p += (unsigned)__builtin_ctz(m);
                goto stop_byte;
            }
            p += 16;
            /* A long body: 64 bytes per step; the 16-byte loop below then
             * finds the stop byte in the block that has one. */
            while ((padded || end - p >= 64) && !has_stop64(p, k))
                p += 64;
            while (padded || end - p >= 16) {
                m = stop_mask16(p, k);
                if (m) {
                    p += (unsigned)__builtin_ctz(m);
                    goto stop_byte;
                }
                p += 16;
            }
        }
#endif
        while (padded || end - p >= 8) {
            uint64_t v, m;
            memcpy(&v, p, sizeof v);
            m = HAS_ZERO(v ^ (ONES * '"')) | HAS_ZERO(v ^ (ONES * '\\')) | HAS_LESS(v, 0x20);
            if (m) { /* the lowest flagged byte is exact (borrows only go up) */
                p += __builtin_ctzll(m) >> 3;
                goto stop_byte;
            }
            p += 8;
        }
        while (!AT_END(p) && *p >= 0x20 && *p != '"' && *p != '\\')
            p++;
    stop_byte:
        if (AT_END(p))
            return NULL;
        if (*p == '"')
            return p + 1;
        if (*p < 0x20)
            return NULL; /* RFC 8259 7: control characters must be escaped */
        *escaped = 1;
        p = scan_escape(p + 1, end);
        if (p == NULL)
            return NULL;
    }
}

#endif
