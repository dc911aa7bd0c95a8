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

/* Smallest power of two >= n (n >= 1). */
static inline uint32_t sb_hash_pow2(uint32_t n) {
    uint32_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

#endif
