/* Differential fuzz target: sb_fields_parse against cJSON 1.7.15.
 *
 * For every input both must agree on: valid JSON or not, object or not,
 * and for each of the five routing keys its presence, its type and its
 * value. Any disagreement aborts.
 *
 * cJSON 1.7.15 differs from RFC 8259 (checked against the library, see
 * normalise()) in ways the oracle settles itself before asking cJSON:
 *   - every byte <= 0x20 is whitespace to it (NUL, VT, FF, ...);
 *   - raw control characters inside strings are copied, not rejected;
 *   - "\uZZZZ" (non-hex digits) reads as "\u0000" (parse_hex4 returns 0);
 *   - numbers go through strtod: "01", "-01", "1.", "-.5", "1.e5" pass;
 *   - upstream (not Debian's patched build) fails numbers over 63 bytes;
 *   - a leading UTF-8 BOM is skipped (sb_fields_parse rejects it);
 *   - keys are C strings, so "id\u0000x" is found as "id": inputs with
 *     \u0000 in a key are checked for validity only.
 * Where both are strict (lone surrogates, escapes, literals, nesting limit
 * of 1000, trailing commas) cJSON is the oracle as is. */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fields.h"
#include "idkey.h"
#include "status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fields_fuzzer: %s:%d: check failed: %s\n", __FILE__, __LINE__,        \
                    #cond);                                                                        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The longest number upstream cJSON 1.7.15 can parse: parse_number copies
 * at most 63 bytes into a stack buffer, so a longer (valid) number fails
 * there. Debian's patched 1.7.15 has no limit. */
#define CJSON_NUMBER_MAX 63

static int is_number_byte(unsigned char c) {
    return (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E';
}

static int is_json_ws(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_digit(unsigned char c) {
    return c >= '0' && c <= '9';
}

/* Whether s[0..n) is exactly one RFC 8259 number. Written independently of
 * src/base/fields.c, on purpose. */
static int rfc_number(const unsigned char *s, size_t n) {
    size_t i = 0;

    if (i < n && s[i] == '-')
        i++;
    if (i < n && s[i] == '0') {
        i++;
    } else if (i < n && s[i] >= '1' && s[i] <= '9') {
        while (i < n && is_digit(s[i]))
            i++;
    } else {
        return 0;
    }
    if (i < n && s[i] == '.') {
        i++;
        if (i == n || !is_digit(s[i]))
            return 0;
        while (i < n && is_digit(s[i]))
            i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i == n || !is_digit(s[i]))
            return 0;
        while (i < n && is_digit(s[i]))
            i++;
    }
    return i == n;
}

/* What normalise() learnt about the input. */
typedef struct {
    int invalid;              /* settled: not JSON, whatever cJSON says */
    int nul_in_key;           /* a key holds \u0000, which cJSON truncates */
    unsigned char *rewritten; /* per byte: 1 if part of a rewritten number */
} verdict;

/* Settles the cases where cJSON 1.7.15 is more lenient than RFC 8259 (or,
 * for long numbers, stricter), working on buf, a copy of the input that is
 * then given to cJSON. Length-preserving, so offsets stay the same.
 *
 * It relies on facts true of every valid JSON text: outside strings, a
 * maximal run of the bytes [0-9+-.eE] that starts with '-' or a digit is
 * exactly one number token (the only other such bytes are the 'e' ending
 * true/false); a string followed by ':' is a key. On invalid input the
 * facts may not hold, which is harmless: whatever is flagged is invalid,
 * and what is not flagged is left to cJSON. */
static void normalise(unsigned char *buf, size_t n, verdict *v) {
    size_t i = 0;

    /* cJSON skips a UTF-8 BOM; sb_fields_parse rejects it (fields.c). */
    if (n >= 3 && buf[0] == 0xEF && buf[1] == 0xBB && buf[2] == 0xBF) {
        v->invalid = 1;
        return;
    }
    while (i < n) {
        unsigned char c = buf[i];
        if (c == '"') {
            int nul = 0;
            for (i++; i < n && buf[i] != '"'; i++) {
                /* cJSON copies raw control characters in strings. */
                if (buf[i] < 0x20) {
                    v->invalid = 1;
                    return;
                }
                if (buf[i] == '\\') {
                    if (i + 1 < n && buf[i + 1] == 'u') {
                        /* cJSON's parse_hex4 returns 0 for a non-hex digit,
                         * so it reads "\uZZZZ" as "\u0000". */
                        for (size_t k = i + 2; k < i + 6; k++) {
                            if (k >= n || !isxdigit(buf[k])) {
                                v->invalid = 1;
                                return;
                            }
                        }
                        if (memcmp(buf + i + 2, "0000", 4) == 0)
                            nul = 1;
                    }
                    i++;
                }
            }
            if (i >= n)
                return; /* unterminated: cJSON rejects it */
            i++;
            if (nul) {
                size_t k = i;
                while (k < n && is_json_ws(buf[k]))
                    k++;
                if (k < n && buf[k] == ':')
                    v->nul_in_key = 1;
            }
        } else if (is_number_byte(c)) {
            size_t start = i;
            while (i < n && is_number_byte(buf[i]))
                i++;
            if (c != '-' && !is_digit(c))
                continue; /* 'e' of true/false, or garbage cJSON rejects */
            /* cJSON's strtod takes "01", "1.", "-.5", "1.e5" and more. */
            if (!rfc_number(buf + start, i - start)) {
                v->invalid = 1;
                return;
            }
            if (i - start > CJSON_NUMBER_MAX) {
                /* Valid, but too long for upstream cJSON: let it see 0. */
                buf[start] = '0';
                memset(buf + start + 1, ' ', i - start - 1);
                memset(v->rewritten + start, 1, i - start);
            }
        } else if (c < 0x20 && !is_json_ws(c)) {
            /* cJSON's whitespace is every byte <= 0x20, NUL included. */
            v->invalid = 1;
            return;
        } else {
            i++;
        }
    }
}

static sb_json_type cjson_type(const cJSON *item) {
    if (cJSON_IsString(item))
        return SB_JSON_STRING;
    if (cJSON_IsNumber(item))
        return SB_JSON_NUMBER;
    if (cJSON_IsTrue(item))
        return SB_JSON_TRUE;
    if (cJSON_IsFalse(item))
        return SB_JSON_FALSE;
    if (cJSON_IsNull(item))
        return SB_JSON_NULL;
    if (cJSON_IsObject(item))
        return SB_JSON_OBJECT;
    if (cJSON_IsArray(item))
        return SB_JSON_ARRAY;
    CHECK(!"cJSON item of unknown type");
    return SB_JSON_ABSENT;
}

static void check_absent(const sb_token *t) {
    CHECK(t->type == SB_JSON_ABSENT);
    CHECK(t->raw == NULL);
    CHECK(t->raw_len == 0);
}

/* Compares one routing field with cJSON's view of it. */
static void check_field(const uint8_t *data, size_t size, const unsigned char *norm,
                        const verdict *v, const cJSON *item, const sb_token *t) {
    const unsigned char *raw = (const unsigned char *)t->raw;
    size_t off, len = t->raw_len;
    const char *end = NULL;
    cJSON *again;
    char *a, *b;

    if (item == NULL) {
        check_absent(t);
        return;
    }
    CHECK(t->type == cjson_type(item));
    CHECK(raw != NULL && len > 0);
    CHECK(raw >= data && raw + len <= data + size);
    off = (size_t)(raw - data);
    /* The token is a whole value: after a ':' (and whitespace) and not
     * followed by more of the same number. */
    {
        size_t k = off;
        while (k > 0 && is_json_ws(data[k - 1]))
            k--;
        CHECK(k > 0 && data[k - 1] == ':');
    }
    if (t->type == SB_JSON_NUMBER) {
        CHECK(rfc_number(raw, len));
        CHECK(off + len == size || !is_number_byte(data[off + len]));
        if (v->rewritten[off])
            return; /* cJSON saw 0 in its place; the spelling is checked */
    }
    /* Same value: parse the token alone (in the copy cJSON saw) and print
     * both unformatted; printing makes inf == inf and compares strings and
     * whole sub-trees at once. */
    again = cJSON_ParseWithLengthOpts((const char *)norm + off, len, &end, 0);
    CHECK(again != NULL);
    CHECK(end == (const char *)norm + off + len);
    a = cJSON_PrintUnformatted(item);
    b = cJSON_PrintUnformatted(again);
    CHECK(a != NULL && b != NULL);
    if (strcmp(a, b) != 0) {
        fprintf(stderr, "fields_fuzzer: value %s, token parses as %s\n", a, b);
        abort();
    }
    cJSON_free(a);
    cJSON_free(b);
    cJSON_Delete(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sb_fields f;
    int rc = sb_fields_parse((const char *)data, size, &f);
    unsigned char *norm = malloc(size > 0 ? size : 1);
    verdict v = {0, 0, calloc(size > 0 ? size : 1, 1)};
    cJSON *root = NULL;
    int valid = 0;

    CHECK(norm != NULL && v.rewritten != NULL);
    CHECK(rc == STDIO_BUS_OK || rc == STDIO_BUS_EINVAL || rc == STDIO_BUS_ERR);
    if (size > 0)
        memcpy(norm, data, size);
    normalise(norm, size, &v);
    if (!v.invalid && size > 0) {
        const char *end = NULL;
        root = cJSON_ParseWithLengthOpts((const char *)norm, size, &end, 0);
        if (root != NULL) {
            /* Only JSON whitespace may follow the value. */
            valid = 1;
            for (const char *p = end; p < (const char *)norm + size; p++)
                if (!is_json_ws((unsigned char)*p))
                    valid = 0;
        }
    }

    if (!valid) {
        if (rc != STDIO_BUS_ERR)
            fprintf(stderr, "fields_fuzzer: accepted (%d) what cJSON rejects\n", rc);
        CHECK(rc == STDIO_BUS_ERR);
    } else if (!cJSON_IsObject(root)) {
        if (rc != STDIO_BUS_EINVAL)
            fprintf(stderr, "fields_fuzzer: %d for a non-object cJSON accepts\n", rc);
        CHECK(rc == STDIO_BUS_EINVAL);
    } else {
        if (rc != STDIO_BUS_OK)
            fprintf(stderr, "fields_fuzzer: %d for an object cJSON accepts\n", rc);
        CHECK(rc == STDIO_BUS_OK);
    }

    if (rc == STDIO_BUS_OK) {
        /* The parser's plain flag is sound: a token it calls plain is, by
         * a second look at its bytes (SB-I-45: the pending table trusts it
         * to skip that look). It may call a plain token not plain. */
        const sb_token *t[] = {&f.id, &f.session_id, &f.method};
        for (size_t i = 0; i < sizeof t / sizeof *t; i++)
            if ((t[i]->type == SB_JSON_STRING || t[i]->type == SB_JSON_NUMBER) &&
                t[i]->raw_len < SB_IDKEY_MAX)
                CHECK(!sb_idkey_of(t[i]->raw, t[i]->raw_len, t[i]->plain).plain ||
                      sb_idkey_raw(t[i]->raw, t[i]->raw_len).plain);
    }

    if (rc != STDIO_BUS_OK) {
        check_absent(&f.id);
        check_absent(&f.session_id);
        check_absent(&f.method);
        check_absent(&f.result);
        check_absent(&f.error);
    } else if (!v.nul_in_key) {
        /* cJSON_GetObjectItemCaseSensitive returns the first match, which
         * is the rule sb_fields_parse follows for duplicate keys. */
        check_field(data, size, norm, &v, cJSON_GetObjectItemCaseSensitive(root, "id"), &f.id);
        check_field(data, size, norm, &v, cJSON_GetObjectItemCaseSensitive(root, "sessionId"),
                    &f.session_id);
        check_field(data, size, norm, &v, cJSON_GetObjectItemCaseSensitive(root, "method"),
                    &f.method);
        check_field(data, size, norm, &v, cJSON_GetObjectItemCaseSensitive(root, "result"),
                    &f.result);
        check_field(data, size, norm, &v, cJSON_GetObjectItemCaseSensitive(root, "error"),
                    &f.error);
    }

    cJSON_Delete(root);
    free(v.rewritten);
    free(norm);
    return 0;
}
