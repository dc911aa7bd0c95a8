#include "idkey.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Integers of at most 15 digits are exact in a double, so they are their
 * own canonical form; longer ones go through the double like any number. */
#define SB_IDKEY_EXACT_DIGITS 15

static int is_canonical_number(const char *raw, size_t len) {
    size_t i = raw[0] == '-' ? 1 : 0;
    if (len - i > SB_IDKEY_EXACT_DIGITS || len == i)
        return 0;
    if (raw[i] == '0' && len - i == 1)
        return i == 0; /* "-0" is 0 */
    for (; i < len; i++)
        if (raw[i] < '0' || raw[i] > '9')
            return 0;
    return 1;
}

static size_t canon_number(const char *raw, size_t len, char *buf) {
    char tmp[SB_IDKEY_MAX];
    if (len >= sizeof tmp)
        len = sizeof tmp - 1;
    memcpy(tmp, raw, len);
    tmp[len] = '\0';
    double v = strtod(tmp, NULL);
    int n;
    if (v == 0)
        n = snprintf(buf, SB_IDKEY_MAX, "0");
    else if (v > -9007199254740992.0 && v < 9007199254740992.0 && v == (double)(long long)v)
        n = snprintf(buf, SB_IDKEY_MAX, "%lld", (long long)v);
    else
        n = snprintf(buf, SB_IDKEY_MAX, "%.17g", v);
    return n > 0 ? (size_t)n : 0;
}

static int hex4(const char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

static size_t put_utf8(char *out, unsigned cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes the escapes of a string token, quotes kept. Every escape is at
 * least as long as what it decodes to, so the result fits in raw_len bytes.
 * Returns 0 on an escape the JSON grammar does not allow (the caller then
 * keeps the raw token: such a line never got past the parser anyway). */
static size_t canon_string(const char *raw, size_t len, char *buf) {
    size_t o = 0;
    buf[o++] = '"';
    for (size_t i = 1; i + 1 < len; i++) {
        char c = raw[i];
        if (c != '\\') {
            buf[o++] = c;
            continue;
        }
        if (++i + 1 >= len)
            return 0;
        switch (raw[i]) {
        case '"':
            buf[o++] = '"';
            break;
        case '\\':
            buf[o++] = '\\';
            break;
        case '/':
            buf[o++] = '/';
            break;
        case 'b':
            buf[o++] = '\b';
            break;
        case 'f':
            buf[o++] = '\f';
            break;
        case 'n':
            buf[o++] = '\n';
            break;
        case 'r':
            buf[o++] = '\r';
            break;
        case 't':
            buf[o++] = '\t';
            break;
        case 'u': {
            unsigned cp, lo;
            if (i + 5 >= len || !hex4(raw + i + 1, &cp))
                return 0;
            i += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && i + 7 < len && raw[i + 1] == '\\' &&
                raw[i + 2] == 'u' && hex4(raw + i + 3, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            }
            o += put_utf8(buf + o, cp); /* a lone surrogate keeps its 3-byte form */
            break;
        }
        default:
            return 0;
        }
    }
    buf[o++] = '"';
    return o;
}

static int is_plain(const char *raw, size_t len) {
    if (len == 0 || len >= SB_IDKEY_MAX)
        return 1; /* never canonicalised */
    if (raw[0] == '"')
        return memchr(raw, '\\', len) == NULL;
    if (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
        return is_canonical_number(raw, len);
    return 1; /* null */
}

sb_idkey sb_idkey_raw(const char *raw, size_t len) {
    return is_plain(raw, len) ? sb_idkey_of(raw, len, 1) : sb_idkey_of_slow(raw, len);
}

sb_idkey sb_idkey_of_slow(const char *raw, size_t len) {
    if (len > UINT16_MAX)
        len = UINT16_MAX; /* never a valid id: the table refuses it */
    sb_idkey k = {raw, (uint16_t)len, (uint8_t)is_plain(raw, len), 0};
    char buf[SB_IDKEY_MAX];
    const char *canon;
    size_t n = sb_idkey_canon(k, buf, &canon);
    k.hash = sb_hash_bytes(0, canon, n);
    return k;
}

size_t sb_idkey_canon_slow(sb_idkey id, char *buf, const char **canon) {
    *canon = id.raw;
    if (id.plain || id.len == 0 || id.len >= SB_IDKEY_MAX)
        return id.len;
    size_t n = 0;
    if (id.raw[0] == '"')
        n = canon_string(id.raw, id.len, buf);
    else if (id.raw[0] == '-' || (id.raw[0] >= '0' && id.raw[0] <= '9'))
        n = canon_number(id.raw, id.len, buf);
    if (n == 0)
        return id.len; /* a token the parser would not have passed */
    *canon = buf;
    return n;
}
