/* The value of a request id, for telling whether two ids could be confused.
 *
 * The daemon matches responses by the exact id token (SB-I-3), but a worker
 * that parses and re-serialises JSON answers `1.0` as `1` and `"\u0061"` as
 * `"a"`. Two requests pending on one worker whose ids have the same value
 * could then get each other's answers, so the router never lets that happen
 * (SB-I-45). This module gives each id token a canonical form in which ids
 * of the same JSON value are equal bytes. Pure: no allocation, no I/O. */
#ifndef SB_IDKEY_H
#define SB_IDKEY_H

#include "hash.h"

#include <stddef.h>
#include <stdint.h>

/* Room for the canonical form of any id the daemon accepts (a string of at
 * most STDIO_BUS_MAX_REQUEST_ID_LEN bytes between its quotes never grows
 * when its escapes are decoded; a number prints in at most 25 bytes). */
#define SB_IDKEY_MAX 160

/* An id token as the pending table keys it. `plain` says the token is its
 * own canonical form, which the field parser knows for free (sb_token.plain)
 * and which spares the per-message path any second look at the bytes;
 * `hash` is the hash of the canonical form, computed once per message.
 * 16 bytes, so it travels in two registers. Ids the daemon accepts are far
 * shorter than 64 KiB (STDIO_BUS_MAX_REQUEST_ID_LEN). */
typedef struct {
    const char *raw;
    uint16_t len;
    uint8_t plain;
    uint32_t hash;
} sb_idkey;

/* The key of a raw token whose plainness is not known: looks at its bytes. */
sb_idkey sb_idkey_raw(const char *raw, size_t len);

/* The key of a token from the field parser, whose plain flag (no escapes,
 * no fraction or exponent) leaves only a number's length and -0 to check:
 * integers of up to 15 digits are exact in a double. */
sb_idkey sb_idkey_of_slow(const char *raw, size_t len);
static inline sb_idkey sb_idkey_of(const char *raw, size_t len, int parser_plain) {
    if (!parser_plain || len > UINT16_MAX ||
        (raw[0] != '"' && raw[0] != 'n' &&
         (len > 15u + (raw[0] == '-') || (len == 2 && raw[0] == '-' && raw[1] == '0'))))
        return sb_idkey_of_slow(raw, len);
    sb_idkey k = {raw, (uint16_t)len, 1, sb_hash_bytes(0, raw, len)};
    return k;
}

/* Canonical form of an id token (a JSON string, number or null, as written):
 * strings decoded to their UTF-8 value, numbers to the value of the double
 * they denote (-0 as 0, integers without exponent), each still quoted or
 * bare so that "1" and 1 stay apart. A plain token is already canonical:
 * then *canon points at its raw bytes and nothing is copied. Otherwise the
 * form is written into buf (SB_IDKEY_MAX bytes, owned by the caller) and
 * *canon points there. Returns the canonical length. */
size_t sb_idkey_canon_slow(sb_idkey id, char *buf, const char **canon);
static inline size_t sb_idkey_canon(sb_idkey id, char *buf, const char **canon) {
    if (id.plain) {
        *canon = id.raw;
        return id.len;
    }
    return sb_idkey_canon_slow(id, buf, canon);
}

#endif
