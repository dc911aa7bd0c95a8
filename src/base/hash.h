/* A small, fast hash for table keys (FNV-1a, 32 bit). Keys are short
 * (ids and session ids of at most a few hundred bytes). */
#ifndef SB_HASH_H
#define SB_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint32_t sb_hash_bytes(uint32_t seed, const char *data, size_t len) {
    uint32_t h = 2166136261u ^ seed;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)data[i];
        h *= 16777619u;
    }
    return h;
}

/* Whether a[0..n) and b[0..n) hold the same bytes. Table keys are mostly
 * short tokens (ids, sessionIds): up to 16 bytes they are compared with
 * two overlapping loads each, inline, where a memcmp call costs more than
 * the compare; the loads stay within [0, n). */
static inline int sb_bytes_equal(const void *a, const void *b, size_t n) {
    const unsigned char *x = a, *y = b;
    uint64_t u, v, s, t;
    uint32_t i, j, k, l;
    if (n >= 8 && n <= 16) {
        __builtin_memcpy(&u, x, 8);
        __builtin_memcpy(&v, y, 8);
        __builtin_memcpy(&s, x + n - 8, 8);
        __builtin_memcpy(&t, y + n - 8, 8);
        return ((u ^ v) | (s ^ t)) == 0;
    }
    if (n >= 4 && n < 8) {
        __builtin_memcpy(&i, x, 4);
        __builtin_memcpy(&j, y, 4);
        __builtin_memcpy(&k, x + n - 4, 4);
        __builtin_memcpy(&l, y + n - 4, 4);
        return ((i ^ j) | (k ^ l)) == 0;
    }
    if (n < 4) {
        for (size_t m = 0; m < n; m++)
            if (x[m] != y[m])
                return 0;
        return 1;
    }
    return __builtin_memcmp(x, y, n) == 0;
}

/* Smallest power of two >= n (n >= 1). */
static inline uint32_t sb_hash_pow2(uint32_t n) {
    uint32_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

#endif
