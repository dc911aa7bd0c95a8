/* Every shortcut of the routing-field scanner (src/base/fields.c) against its
 * general path, on near misses (issue 34, item 3):
 *   - the 17 bytes {"jsonrpc":"2.0", matched with two 8-byte loads and a
 *     byte compare (81bc5b6), against the same line after one leading space,
 *     which the byte-at-a-time states scan;
 *   - the key "id": after them, matched with a 4-byte load and a byte
 *     compare (dac1d69), against the same;
 *   - the routing keys matched with fixed-size loads (key_slot, 2f559b8),
 *     against the same key written with an escape, which key_equals decodes
 *     byte by byte;
 *   - the zero-padded copy scanned without end checks (dd7898c), against
 *     the scanner built with SB_FIELDS_PAD_MAX=0, which scans every line in
 *     place with its end checks;
 * and all of them against a strict JSON parse (cJSON, with its documented
 * leniency about raw control bytes settled first) for the verdict and the
 * type and value of each routing field.
 *
 * A near miss is a line the shortcut matches with one byte changed (at each
 * position, to each of: the byte's two neighbours, '"', '\\', ' ', 0x01,
 * 0x00, 0x80, 0xff), one byte deleted, one whitespace byte inserted, or cut
 * at any length. Every line is parsed from a copy that ends at a PROT_NONE
 * page, so a shortcut that reads past the line crashes. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The scanner once more, built to scan every line in place (fields.h:
 * "-DSB_FIELDS_PAD_MAX=0 scans every line in place") under another name,
 * beside the library's sb_fields_parse, which scans lines of up to 1 KiB
 * from its padded copy. Only the in-place build keeps the end checks of the
 * shortcuts (`padded || len >= 17`), which the shipped build reaches only
 * with lines over 1 KiB, always long enough. */
#define SB_FIELDS_PAD_MAX 0
#define sb_fields_parse   sb_fields_parse_in_place
#include "fields.c"
#undef sb_fields_parse
int sb_fields_parse(const char *line, size_t len, sb_fields *out);

#include <criterion/criterion.h>

#include "status.h"

#define MAX_LINE 256

/* ---- guarded copies ---------------------------------------------------- */

/* One region per parse whose tokens are compared: each a page of data
 * followed by a PROT_NONE page. */
enum { AT_FAST, AT_GENERAL, AT_IN_PLACE, REGIONS };
static unsigned char *map;
static size_t page;

static void setup(void) {
    page = (size_t)sysconf(_SC_PAGESIZE);
    map =
        mmap(NULL, 2 * REGIONS * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(map != MAP_FAILED);
    for (int r = 0; r < REGIONS; r++)
        cr_assert(mprotect(map + (2 * r + 1) * page, page, PROT_NONE) == 0);
}

static void teardown(void) {
    munmap(map, 2 * REGIONS * page);
}

/* Copies s[0..n) to end at region r's guard page. */
static const char *guarded(int r, const char *s, size_t n) {
    char *copy = (char *)map + (2 * r + 1) * page - n;
    memcpy(copy, s, n);
    return copy;
}

/* A line for messages: printable ASCII as is, everything else as \xNN. */
static const char *show(const char *s, size_t n) {
    static char buf[4 * MAX_LINE + 1];
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < sizeof buf; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f)
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, sizeof buf - o, "\\x%02x", c);
    }
    buf[o] = '\0';
    return buf;
}

static const char *verdict_name(int rc) {
    switch (rc) {
    case STDIO_BUS_OK:
        return "an object";
    case STDIO_BUS_EINVAL:
        return "JSON but not an object";
    case STDIO_BUS_ERR:
        return "not JSON";
    default:
        return "an unknown code";
    }
}

/* ---- the strict reference ---------------------------------------------- */

/* cJSON takes every byte <= 0x20 for whitespace and copies raw control
 * bytes inside strings; RFC 8259 allows neither. Written here, apart from
 * fields.c: whether s[0..n) holds a raw control byte that no JSON text may
 * hold (in a string: any below 0x20; outside: any but the four blanks). */
static int has_forbidden_control(const char *s, size_t n) {
    int in_string = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (in_string) {
            if (c < 0x20)
                return 1;
            if (c == '\\') { /* the escaped byte: cJSON checks all but a raw control */
                if (i + 1 < n && (unsigned char)s[i + 1] < 0x20)
                    return 1;
                i++;
            } else if (c == '"') {
                in_string = 0;
            }
        } else if (c == '"') {
            in_string = 1;
        } else if (c < 0x20 && c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            return 1;
        }
    }
    return 0;
}

/* The strict verdict on s[0..n) and, for an object, its tree (*root). */
static int strict_parse(const char *s, size_t n, cJSON **root) {
    const char *end = NULL;
    *root = NULL;
    if (n == 0 || has_forbidden_control(s, n))
        return STDIO_BUS_ERR;
    if (n >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0) /* fields.c rejects a BOM */
        return STDIO_BUS_ERR;
    *root = cJSON_ParseWithLengthOpts(s, n, &end, 0);
    if (*root == NULL)
        return STDIO_BUS_ERR;
    for (; end < s + n; end++)
        if (*end != ' ' && *end != '\t' && *end != '\n' && *end != '\r') {
            cJSON_Delete(*root);
            *root = NULL;
            return STDIO_BUS_ERR;
        }
    return cJSON_IsObject(*root) ? STDIO_BUS_OK : STDIO_BUS_EINVAL;
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
    return SB_JSON_ARRAY;
}

/* ---- comparing two parses ---------------------------------------------- */

static const char *const field_names[] = {"id", "sessionId", "method", "result", "error"};

static const sb_token *field(const sb_fields *f, int i) {
    const sb_token *t[] = {&f->id, &f->session_id, &f->method, &f->result, &f->error};
    return t[i];
}

/* Asserts that two parses of one message found the same fields: same type,
 * same raw bytes at the same offset (the second line has `shift` more bytes
 * before every token), and, when `plain` is asked, the same plain flag. */
static void expect_same_fields(const char *path, const char *line, const sb_fields *a,
                               const char *other_path, const char *other, const sb_fields *b,
                               size_t shift, int plain, const char *what, const char *shown) {
    for (int i = 0; i < 5; i++) {
        const sb_token *x = field(a, i), *y = field(b, i);
        cr_assert_eq(x->type, y->type, "%s: %s: \"%s\" is of type %d on the %s, %d on the %s", what,
                     shown, field_names[i], x->type, path, y->type, other_path);
        if (x->type == SB_JSON_ABSENT)
            continue;
        cr_assert(x->raw_len == y->raw_len &&
                      (size_t)(x->raw - line) + shift == (size_t)(y->raw - other),
                  "%s: %s: \"%s\" is %.*s on the %s, %.*s on the %s", what, shown, field_names[i],
                  (int)x->raw_len, x->raw, path, (int)y->raw_len, y->raw, other_path);
        if (plain)
            cr_assert_eq(x->plain, y->plain, "%s: %s: \"%s\" plain %d on the %s, %d on the %s",
                         what, shown, field_names[i], x->plain, path, y->plain, other_path);
    }
}

/* Asserts that the fast path's fields are the strict parse's: each present
 * with the same type and the same value, or absent in both. */
static void expect_strict_fields(const sb_fields *f, const cJSON *root, const char *what,
                                 const char *shown) {
    for (int i = 0; i < 5; i++) {
        const sb_token *t = field(f, i);
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, field_names[i]);
        if (item == NULL) {
            cr_assert_eq(t->type, SB_JSON_ABSENT,
                         "%s: %s: the fast path found \"%s\" = %.*s, a strict parse finds none",
                         what, shown, field_names[i], (int)t->raw_len, t->raw);
            continue;
        }
        cr_assert_eq(t->type, cjson_type(item),
                     "%s: %s: \"%s\" is of type %d on the fast path, %d by a strict parse", what,
                     shown, field_names[i], t->type, cjson_type(item));
        cJSON *alone = cJSON_ParseWithLength(t->raw, t->raw_len);
        char *want = cJSON_PrintUnformatted(item);
        char *got = alone ? cJSON_PrintUnformatted(alone) : NULL;
        cr_assert(got != NULL && strcmp(want, got) == 0,
                  "%s: %s: \"%s\" is %.*s on the fast path, %s by a strict parse", what, shown,
                  field_names[i], (int)t->raw_len, t->raw, want);
        cJSON_free(want);
        cJSON_free(got);
        cJSON_Delete(alone);
    }
}

static long lines_checked;

/* The four parses of one line, held to each other and to the strict
 * parse: the library (padded copy, shortcuts), the same line after one
 * leading space (no shortcut applies), the in-place build (shortcuts with
 * end checks), and cJSON. */
static void check_line(const char *s, size_t n, const char *what) {
    char spaced[MAX_LINE + 1];
    sb_fields fast, general, in_place;
    cJSON *root;
    const char *shown = show(s, n);

    cr_assert(n < MAX_LINE);
    spaced[0] = ' ';
    memcpy(spaced + 1, s, n);
    const char *a = guarded(AT_FAST, s, n);
    const char *b = guarded(AT_GENERAL, spaced, n + 1);
    const char *c = guarded(AT_IN_PLACE, s, n);
    int rc_fast = sb_fields_parse(a, n, &fast);
    int rc_general = sb_fields_parse(b, n + 1, &general);
    int rc_in_place = sb_fields_parse_in_place(c, n, &in_place);
    int rc_strict = strict_parse(s, n, &root);

    cr_assert_eq(rc_fast, rc_strict, "%s: %s: the fast path says %s, a strict JSON parse %s", what,
                 shown, verdict_name(rc_fast), verdict_name(rc_strict));
    cr_assert_eq(rc_fast, rc_general, "%s: %s: the fast path says %s, the general path %s", what,
                 shown, verdict_name(rc_fast), verdict_name(rc_general));
    cr_assert_eq(rc_fast, rc_in_place, "%s: %s: the padded scan says %s, the in-place scan %s",
                 what, shown, verdict_name(rc_fast), verdict_name(rc_in_place));
    expect_same_fields("fast path", a, &fast, "general path", b, &general, 1, 1, what, shown);
    expect_same_fields("padded scan", a, &fast, "in-place scan", c, &in_place, 0, 1, what, shown);
    if (rc_strict == STDIO_BUS_OK)
        expect_strict_fields(&fast, root, what, shown);
    cJSON_Delete(root);
    lines_checked++;
}

/* ---- near misses ------------------------------------------------------- */

/* The replacement bytes of a near miss for c (those equal to c left out). */
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

/* Checks every one-byte near miss of s in positions [from, to): each byte
 * replaced, deleted, or preceded by an inserted blank. */
static void check_near_misses(const char *s, size_t from, size_t to) {
    static const char blanks[] = {' ', '\t', '\n', '\r'};
    size_t n = strlen(s);
    char buf[MAX_LINE], what[96];

    if (to > n)
        to = n;
    check_line(s, n, "the line itself");
    for (size_t pos = from; pos < to; pos++) {
        unsigned char repl[9];
        int nr = near_misses((unsigned char)s[pos], repl);
        memcpy(buf, s, n);
        for (int r = 0; r < nr; r++) {
            buf[pos] = (char)repl[r];
            snprintf(what, sizeof what, "byte %zu '%c' replaced by 0x%02x", pos, s[pos], repl[r]);
            check_line(buf, n, what);
        }
        /* deleted */
        memcpy(buf, s, pos);
        memcpy(buf + pos, s + pos + 1, n - pos - 1);
        snprintf(what, sizeof what, "byte %zu '%c' deleted", pos, s[pos]);
        check_line(buf, n - 1, what);
        /* a blank inserted before it */
        for (size_t k = 0; k < sizeof blanks; k++) {
            memcpy(buf, s, pos);
            buf[pos] = blanks[k];
            memcpy(buf + pos + 1, s + pos, n - pos);
            snprintf(what, sizeof what, "0x%02x inserted before byte %zu", blanks[k], pos);
            check_line(buf, n + 1, what);
        }
    }
}

/* Checks s cut at every length. */
static void check_cuts(const char *s) {
    char what[64];
    size_t n = strlen(s);
    for (size_t len = 0; len <= n; len++) {
        snprintf(what, sizeof what, "cut to %zu bytes", len);
        check_line(s, len, what);
    }
}

#define PREFIX_LEN 17 /* {"jsonrpc":"2.0", */
#define ID_LEN     5  /* "id": */

/* Lines that open with the prefix, and some that nearly do: requests,
 * responses, notifications, the key "id" and its near relatives right
 * after the prefix, and blanks around each of its tokens. */
static const char *const prefixed[] = {
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}",
    "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{\"x\":[1,2]}}",
    "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-1}}",
    "{\"jsonrpc\":\"2.0\",\"id\":7,\"sessionId\":\"s1\",\"method\":\"m\"}",
    "{\"jsonrpc\":\"2.0\",\"id\":2,\"id\":3}",
    "{\"jsonrpc\":\"2.0\",\"id\":{\"id\":4}}",
    "{\"jsonrpc\":\"2.0\",\"method\":\"notify\",\"params\":{\"id\":5}}",
    "{\"jsonrpc\":\"2.0\",\"sessionId\":\"s\",\"id\":6}",
    "{\"jsonrpc\":\"2.0\",\"ids\":1,\"id\":8}",
    "{\"jsonrpc\":\"2.0\",\"i\":1}",
    "{\"jsonrpc\":\"2.0\",\"idx:y\":1,\"id\":9}",
    "{\"jsonrpc\":\"2.0\",\"id\" :1}",
    "{\"jsonrpc\":\"2.0\",\"id\": 1}",
    "{\"jsonrpc\":\"2.0\", \"id\":1}",
    "{\"jsonrpc\":\"2.0\" ,\"id\":1}",
    "{\"jsonrpc\":\"2.0\"}",
    "{\"jsonrpc\":\"2.0\",\"id\":1}",
    "{\"jsonrpc\":\"2.00\",\"id\":1}",
    "{ \"jsonrpc\" : \"2.0\" , \"id\" : 1 }",
    "[{\"jsonrpc\":\"2.0\",\"id\":1}]",
};
#define N_PREFIXED (sizeof prefixed / sizeof *prefixed)

Test(fields, prefix_fast_path_agrees_with_general_path_on_near_misses, .init = setup,
     .fini = teardown) {
    lines_checked = 0;
    for (size_t i = 0; i < N_PREFIXED; i++)
        check_near_misses(prefixed[i], 0, PREFIX_LEN);
    cr_log_info("%ld lines", lines_checked);
}

Test(fields, prefix_fast_path_agrees_with_general_path_on_lines_cut_at_every_length, .init = setup,
     .fini = teardown) {
    for (size_t i = 0; i < N_PREFIXED; i++)
        check_cuts(prefixed[i]);
}

Test(fields, id_fast_path_agrees_with_general_path_on_near_misses, .init = setup,
     .fini = teardown) {
    /* the 5 bytes of "id": and the value's first byte after them */
    for (size_t i = 0; i < N_PREFIXED; i++)
        check_near_misses(prefixed[i], PREFIX_LEN, PREFIX_LEN + ID_LEN + 1);
}

/* ---- routing keys ------------------------------------------------------ */

/* Checks one key k[0..kn) in several members, plain, and against the same
 * line with the key's first byte written as a \u escape (the escaped-key
 * path, key_equals) when that byte may be so written. */
static void check_key(const char *k, size_t kn, const char *what) {
    static const char *const forms[][2] = {
        {"{\"", "\":\"v\"}"},
        {"{\"jsonrpc\":\"2.0\",\"", "\":1}"},
        {"{\"a\":0,\"", "\":[1],\"id\":9}"},
        {
            "{\"x\":{\"",
            "\":1},\"",
        }, /* nested: never a routing field; completed below */
    };
    char line[MAX_LINE], esc[MAX_LINE + 8];

    for (size_t f = 0; f < sizeof forms / sizeof *forms; f++) {
        size_t n = 0, head = strlen(forms[f][0]);
        memcpy(line, forms[f][0], head);
        n = head;
        memcpy(line + n, k, kn);
        n += kn;
        memcpy(line + n, forms[f][1], strlen(forms[f][1]));
        n += strlen(forms[f][1]);
        if (f == 3) { /* the same key again at top level */
            memcpy(line + n, k, kn);
            n += kn;
            memcpy(line + n, "\":2}", 4);
            n += 4;
        }
        check_line(line, n, what);

        unsigned char c0 = kn > 0 ? (unsigned char)k[0] : 0;
        if (f == 3 || kn == 0 || c0 < 0x20 || c0 > 0x7e || c0 == '"' || c0 == '\\')
            continue; /* (form 3 spells the key twice) */
        /* The key's first byte as \u00XX: 5 more bytes before every token. */
        size_t m = 0;
        memcpy(esc, line, head);
        m = head;
        m += (size_t)snprintf(esc + m, sizeof esc - m, "\\u%04x", c0);
        memcpy(esc + m, line + head + 1, n - head - 1);
        m += n - head - 1;
        sb_fields plain, escaped;
        const char *a = guarded(AT_FAST, line, n);
        const char *b = guarded(AT_GENERAL, esc, m);
        int rc_plain = sb_fields_parse(a, n, &plain);
        int rc_escaped = sb_fields_parse(b, m, &escaped);
        const char *shown = show(line, n);
        cr_assert_eq(rc_plain, rc_escaped, "%s: %s: %s plain, %s with an escaped key", what, shown,
                     verdict_name(rc_plain), verdict_name(rc_escaped));
        expect_same_fields("plain key", a, &plain, "escaped key", b, &escaped, 5, 0, what, shown);
    }
}

Test(fields, key_fast_paths_agree_with_escaped_keys_on_near_misses, .init = setup,
     .fini = teardown) {
    static const char *const keys[] = {"id", "error", "method", "result", "sessionId", "jsonrpc"};
    static const unsigned char longer[] = {'d', 'x', ' ', 0x80};
    char k[32], what[96];

    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        size_t n = strlen(keys[i]);
        check_key(keys[i], n, "the key itself");
        for (size_t pos = 0; pos < n; pos++) {
            unsigned char repl[9];
            int nr = near_misses((unsigned char)keys[i][pos], repl);
            memcpy(k, keys[i], n);
            for (int r = 0; r < nr; r++) {
                k[pos] = (char)repl[r];
                snprintf(what, sizeof what, "key \"%s\" byte %zu replaced by 0x%02x", keys[i], pos,
                         repl[r]);
                check_key(k, n, what);
            }
        }
        for (size_t len = 0; len < n; len++) {
            snprintf(what, sizeof what, "key \"%s\" cut to %zu bytes", keys[i], len);
            check_key(keys[i], len, what);
        }
        for (size_t j = 0; j < sizeof longer; j++) {
            memcpy(k, keys[i], n);
            k[n] = (char)longer[j];
            snprintf(what, sizeof what, "key \"%s\" and 0x%02x", keys[i], longer[j]);
            check_key(k, n + 1, what);
        }
    }
}
