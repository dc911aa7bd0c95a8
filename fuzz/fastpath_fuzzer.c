/* Differential fuzz target: every shortcut of the per-message path against
 * its general path (issue 34, item 3). For every input:
 *
 *   - the routing-field scanner, three ways: the line as given (lines of up
 *     to SB_FIELDS_PAD_MAX bytes: the zero-padded copy, the 17-byte
 *     {"jsonrpc":"2.0", prefix, the 4-byte "id": match, the fixed-size key
 *     compares); the same line after one leading space (no prefix or "id"
 *     shortcut applies: the byte-at-a-time states); and the same line
 *     followed by blanks past SB_FIELDS_PAD_MAX (scanned in place, with its
 *     end checks). All three give the same verdict and the same fields at
 *     the same offsets, with the same plain flags (fields_fuzzer holds the
 *     verdict and the values to cJSON); and each field found sits after a
 *     key that decodes, by the byte-at-a-time decoder below, to its name
 *     (the fixed-size compares of key_slot against the general reading);
 *   - sb_bytes_equal (hash.h, inline loads up to 16 bytes) against memcmp:
 *     the input after its first two bytes is a key, compared at every
 *     length up to 40 with a copy that differs in one byte (input byte 0
 *     picks the position, byte 1 the bits flipped, 0 none), each in a heap
 *     block of exactly its length so ASan sees a load past its end.
 *
 * Any disagreement aborts. No state is kept between inputs. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fields.h"
#include "hash.h"
#include "status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fastpath_fuzzer: %s:%d: check failed: %s\n", __FILE__, __LINE__,      \
                    #cond);                                                                        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Longest key compared: past the widest inline compare (16) twice over. */
#define KEY_MAX 40

static const sb_token *field(const sb_fields *f, int i) {
    switch (i) {
    case 0:
        return &f->id;
    case 1:
        return &f->session_id;
    case 2:
        return &f->method;
    case 3:
        return &f->result;
    default:
        return &f->error;
    }
}

/* Two parses of one message found the same fields; the second line has
 * `shift` more bytes before every token. */
static void check_same_fields(const char *a_line, const sb_fields *a, const char *b_line,
                              const sb_fields *b, size_t shift) {
    for (int i = 0; i < 5; i++) {
        const sb_token *x = field(a, i), *y = field(b, i);
        CHECK(x->type == y->type);
        if (x->type == SB_JSON_ABSENT)
            continue;
        CHECK(x->raw_len == y->raw_len);
        CHECK((size_t)(x->raw - a_line) + shift == (size_t)(y->raw - b_line));
        CHECK(x->plain == y->plain);
    }
}

static const char *const field_names[] = {"id", "sessionId", "method", "result", "error"};

static int is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Whether the key whose body is k[0..n) (between its quotes, escapes as
 * written) decodes to name. Written apart from fields.c, byte by byte. */
static int key_decodes_to(const char *k, size_t n, const char *name) {
    size_t i = 0, j = 0, len = strlen(name);
    while (i < n) {
        unsigned c = (unsigned char)k[i++];
        if (c == '\\') {
            CHECK(i < n);
            c = (unsigned char)k[i++];
            if (c == 'u') {
                CHECK(i + 4 <= n);
                c = 0;
                for (int d = 0; d < 4; d++) {
                    int h = hex_value((unsigned char)k[i++]);
                    CHECK(h >= 0);
                    c = c * 16 + (unsigned)h;
                }
            } else if (c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
                return 0; /* a control byte: in no routing key */
            }
        }
        if (j == len || c != (unsigned char)name[j])
            return 0;
        j++;
    }
    return j == len;
}

/* Each field found in line[0..) sits after its own key: the token is
 * preceded by blanks, a ':', blanks and a string that decodes to its name. */
static void check_keys(const char *line, const sb_fields *f) {
    for (int i = 0; i < 5; i++) {
        const sb_token *t = field(f, i);
        if (t->type == SB_JSON_ABSENT)
            continue;
        const char *p = t->raw;
        while (p > line && is_blank(p[-1]))
            p--;
        CHECK(p > line && p[-1] == ':');
        p--;
        while (p > line && is_blank(p[-1]))
            p--;
        CHECK(p > line && p[-1] == '"');
        const char *close = --p;
        /* the opening quote: the first '"' before it not escaped */
        for (;;) {
            CHECK(p > line);
            p--;
            if (*p != '"')
                continue;
            size_t backslashes = 0;
            while (p - backslashes > line && p[-1 - (long)backslashes] == '\\')
                backslashes++;
            if (backslashes % 2 == 0)
                break;
        }
        if (!key_decodes_to(p + 1, (size_t)(close - p - 1), field_names[i]))
            fprintf(stderr, "fastpath_fuzzer: \"%s\" found after the key %.*s\n", field_names[i],
                    (int)(close - p + 1), p);
        CHECK(key_decodes_to(p + 1, (size_t)(close - p - 1), field_names[i]));
    }
}

static void check_fields(const uint8_t *data, size_t size) {
    /* Blanks after the line, enough to take it past the padded copy. */
    size_t tail = size > SB_FIELDS_PAD_MAX ? 1 : SB_FIELDS_PAD_MAX + 1 - size;
    char *line = malloc(size > 0 ? size : 1);
    char *spaced = malloc(size + 1);
    char *long_line = malloc(size + tail);
    sb_fields fast, general, in_place;

    CHECK(line != NULL && spaced != NULL && long_line != NULL);
    if (size > 0)
        memcpy(line, data, size);
    spaced[0] = ' ';
    if (size > 0)
        memcpy(spaced + 1, data, size);
    if (size > 0)
        memcpy(long_line, data, size);
    memset(long_line + size, ' ', tail);

    int rc_fast = sb_fields_parse(line, size, &fast);
    int rc_general = sb_fields_parse(spaced, size + 1, &general);
    int rc_in_place = sb_fields_parse(long_line, size + tail, &in_place);
    if (rc_fast != rc_general || rc_fast != rc_in_place)
        fprintf(stderr, "fastpath_fuzzer: verdicts %d as given, %d after a space, %d in place\n",
                rc_fast, rc_general, rc_in_place);
    CHECK(rc_fast == rc_general);
    CHECK(rc_fast == rc_in_place);
    check_same_fields(line, &fast, spaced, &general, 1);
    check_same_fields(line, &fast, long_line, &in_place, 0);
    check_keys(line, &fast);
    free(line);
    free(spaced);
    free(long_line);
}

static void check_bytes_equal(const uint8_t *data, size_t size) {
    if (size < 2)
        return;
    const uint8_t *key = data + 2;
    size_t key_len = size - 2;
    for (size_t n = 0; n <= KEY_MAX && n <= key_len; n++) {
        unsigned char *a = malloc(n > 0 ? n : 1), *b = malloc(n > 0 ? n : 1);
        CHECK(a != NULL && b != NULL);
        memcpy(a, key, n);
        memcpy(b, key, n);
        if (n > 0)
            b[data[0] % n] ^= data[1];
        int want = memcmp(a, b, n) == 0;
        if (sb_bytes_equal(a, b, n) != want)
            fprintf(stderr, "fastpath_fuzzer: length %zu, byte %u ^ 0x%02x: sb_bytes_equal %d\n", n,
                    n > 0 ? (unsigned)(data[0] % n) : 0u, data[1], !want);
        CHECK(sb_bytes_equal(a, b, n) == want);
        CHECK(sb_bytes_equal(b, a, n) == want);
        free(a);
        free(b);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_fields(data, size);
    check_bytes_equal(data, size);
    return 0;
}
