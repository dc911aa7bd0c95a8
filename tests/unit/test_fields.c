/* Unit tests for routing-field extraction (src/base/fields.c; spec 2.2, 4.2.2,
 * 4.3). Every input is parsed from a copy placed right before a PROT_NONE
 * page (as picohttpparser's tests do), so a read past the end crashes even
 * without ASan. (Lines up to SB_FIELDS_PAD_MAX bytes are then copied again
 * by sb_fields_parse itself, into a zero-padded buffer; the guard page
 * covers the longer lines, scanned in place, and that copy.) */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fields.h"
#include "idkey.h"
#include "status.h"

#define LIT(s) (s), (sizeof(s) - 1)

/* Copies s[0..n) so that it ends exactly at a guard page and parses it.
 * The copy stays mapped until the next call, so tokens can be checked. */
static const char *guarded;
static int parse(const char *s, size_t n, sb_fields *out) {
    static char *map;
    static size_t map_len;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t data_pages = (n + page - 1) / page;
    char *copy;

    if (map != NULL)
        munmap(map, map_len);
    map_len = (data_pages + 1) * page;
    map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(map != MAP_FAILED);
    cr_assert(mprotect(map + data_pages * page, page, PROT_NONE) == 0);
    copy = map + data_pages * page - n;
    memcpy(copy, s, n);
    guarded = copy;
    return sb_fields_parse(copy, n, out);
}

static int parse_str(const char *s, sb_fields *out) {
    return parse(s, strlen(s), out);
}

/* Asserts that tok is of type t and its raw bytes are exactly raw. */
static void expect_token(const sb_token *tok, sb_json_type t, const char *raw) {
    cr_assert_eq(tok->type, t, "type %d, expected %d", tok->type, t);
    cr_assert_eq(tok->raw_len, strlen(raw), "raw length %zu, expected %zu (%s)", tok->raw_len,
                 strlen(raw), raw);
    cr_assert(memcmp(tok->raw, raw, tok->raw_len) == 0, "raw is %.*s, expected %s",
              (int)tok->raw_len, tok->raw, raw);
    /* The token points into the caller's line, not into a copy. */
    cr_assert(tok->raw >= guarded);
}

static void expect_absent(const sb_token *tok) {
    cr_assert_eq(tok->type, SB_JSON_ABSENT);
    cr_assert_null(tok->raw);
    cr_assert_eq(tok->raw_len, 0);
}

static void expect_all_absent(const sb_fields *f) {
    expect_absent(&f->id);
    expect_absent(&f->session_id);
    expect_absent(&f->method);
    expect_absent(&f->result);
    expect_absent(&f->error);
}

/* ---- what is a JSON object, what is JSON, what is not ---------------- */

static const char *const objects[] = {
    "{}",
    " {}",
    "{ }",
    "\t{\r\n}\n",
    " {\"id\":1}\r",
    "{\"id\":1}\r\n",
    "{\"a\":1}",
    "{\"a\":[]}",
    "{\"a\":{}}",
    "{\"a\":[1,2,[3,{\"b\":null}]],\"c\":true,\"d\":false}",
    "{\"a\" : 1 , \"b\" : \"x\" }",
    "{\"a\":-0}",
    "{\"a\":0}",
    "{\"a\":1e5}",
    "{\"a\":1E+5}",
    "{\"a\":1e-5}",
    "{\"a\":-1.25e+10}",
    "{\"a\":0.5}",
    "{\"a\":1e999}", /* out of double range, still valid JSON */
    "{\"a\":123456789012345678901234567890123456789012345678901234567890123456789}",
    "{\"a\":\"\"}",
    "{\"a\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}",
    "{\"a\":\"\\u0041\\u00e9\\uFFFF\\u0000\"}",
    "{\"a\":\"\\ud83d\\ude00\"}", /* a surrogate pair */
    "{\"a\":\"\\uD800\\uDC00\"}",
    "{\"a\":\"caf\xc3\xa9\"}",
    "{\"a\":\"\xff\xfe not UTF-8, passed through as in cJSON\"}",
    "{\"a\":\"\x7f\"}",
    "{\"\":0}",
    "{\"a\":1,\"a\":2}",
    "{\"a\":\"long string with no escapes at all, longer than eight bytes\"}",
};

static const char *const non_objects[] = {
    "[1]",
    "[]",
    "1",
    "-0",
    "0",
    "\"x\"",
    "true",
    "false",
    "null",
    " [ 1 , 2 ] ",
    "[{\"id\":1}]",
    "1e5",
    "\"\\ud800\\udc00\"",
};

static const char *const invalid[] = {
    "",
    " ",
    "{",
    "}",
    "{\"a\":1}x",
    "{\"a\":1}}",
    "{}{}",
    "{\"id\":1,}",
    "{,\"id\":1}",
    "{\"id\" 1}",
    "{\"id\":}",
    "{\"id\"}",
    "{id:1}",
    "{'id':1}",
    "{\"a\":1 \"b\":2}",
    "[1,]",
    "[,1]",
    "[1 2]",
    "{\"a\":01}",
    "{\"a\":-01}",
    "{\"a\":00}",
    "{\"a\":1.}",
    "{\"a\":.5}",
    "{\"a\":-.5}",
    "{\"a\":+1}",
    "{\"a\":1e}",
    "{\"a\":1e+}",
    "{\"a\":1.e5}",
    "{\"a\":-}",
    "{\"a\":--1}",
    "{\"a\":1-1}",
    "{\"a\":0x10}",
    "{\"a\":NaN}",
    "{\"a\":Infinity}",
    "{\"a\":-Infinity}",
    "{\"a\":tru}",
    "{\"a\":nul}",
    "{\"a\":fals}",
    "{\"a\":True}",
    "{\"a\":truex}",
    "{\"a\":\"x}",
    "{\"a\":\"x\\\"}",
    "{\"a\":\"\\x\"}",
    "{\"a\":\"\\'\"}",
    "{\"a\":\"\\u12\"}",
    "{\"a\":\"\\u12g4\"}",
    "{\"a\":\"\\U0041\"}",
    "{\"a\":\"\\ud800\"}",        /* lone high surrogate: cJSON rejects it */
    "{\"a\":\"\\udc00\"}",        /* lone low surrogate */
    "{\"a\":\"\\ud800\\u0041\"}", /* high followed by a non-surrogate */
    "{\"a\":\"\\ud800\\ud800\"}", /* high followed by high */
    "{\"a\":\"\\udc00\\ud800\"}", /* pair in the wrong order */
    "{\"a\":\"\\ud800x\"}",
    "{\"a\":\"\\ud800\\\"}",
    "{\"a\":\"tab\there\"}", /* raw control character in a string */
    "{\"a\":\"nl\nhere\"}",
    "{\"a\":1}\x0b", /* VT is not JSON whitespace */
    "\x0c{}",
    "\xef\xbb\xbf{}", /* byte order mark */
    "{\"a\":1}/* c */",
    "// c\n{}",
    "{\"a\":[1,2}",
    "{\"a\":{\"b\":1]}",
    "{\"a\":1]",
    "[1}",
    "{\"a\":1,\"b\"}",
    "{\"a\"::1}",
};

Test(fields, objects_are_accepted) {
    for (size_t i = 0; i < sizeof objects / sizeof *objects; i++) {
        sb_fields f;
        cr_expect_eq(parse_str(objects[i], &f), STDIO_BUS_OK, "rejected: %s", objects[i]);
    }
}

Test(fields, valid_json_that_is_not_an_object_is_einval) {
    for (size_t i = 0; i < sizeof non_objects / sizeof *non_objects; i++) {
        sb_fields f;
        memset(&f, 0xa5, sizeof f);
        cr_expect_eq(parse_str(non_objects[i], &f), STDIO_BUS_EINVAL, "%s", non_objects[i]);
        expect_all_absent(&f);
    }
}

Test(fields, invalid_json_is_rejected) {
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
        sb_fields f;
        memset(&f, 0xa5, sizeof f);
        cr_expect_eq(parse_str(invalid[i], &f), STDIO_BUS_ERR, "accepted: %s", invalid[i]);
        expect_all_absent(&f);
    }
}

Test(fields, nul_bytes_are_rejected_inside_and_outside_strings) {
    sb_fields f;
    cr_expect_eq(parse(LIT("{\"a\":\"x\0y\"}"), &f), STDIO_BUS_ERR);
    cr_expect_eq(parse(LIT("{}\0"), &f), STDIO_BUS_ERR);
    cr_expect_eq(parse(LIT("{\0}"), &f), STDIO_BUS_ERR);
}

Test(fields, length_bounds_the_scan_not_a_terminator) {
    sb_fields f;
    /* Only the first 8 bytes are the line; what follows is not looked at. */
    cr_expect_eq(sb_fields_parse("{\"id\":1}garbage", 8, &f), STDIO_BUS_OK);
    expect_token(&f.id, SB_JSON_NUMBER, "1");
}

Test(fields, every_proper_prefix_of_an_object_is_invalid) {
    static const char *const lines[] = {
        "{\"jsonrpc\":\"2.0\",\"id\":\"a\\u0062\",\"method\":\"m\","
        "\"params\":{\"x\":[1,-2.5e+3,true,false,null,\"\\ud83d\\ude00\"]}}",
        "{\"result\":{\"a\":[]},\"error\":null,\"sessionId\":\"s\"}",
    };
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
        size_t n = strlen(lines[i]);
        for (size_t k = 0; k < n; k++) {
            sb_fields f;
            cr_expect_eq(parse(lines[i], k, &f), STDIO_BUS_ERR,
                         "prefix of %zu bytes accepted: %.*s", k, (int)k, lines[i]);
        }
        sb_fields f;
        cr_expect_eq(parse(lines[i], n, &f), STDIO_BUS_OK);
    }
}

/* ---- nesting ---------------------------------------------------------- */

/* An object whose member "a" nests arrays so that depth (the top-level
 * object included) is exactly `depth`. */
static char *nested_object(size_t depth, size_t *len) {
    size_t arrays = depth - 1;
    size_t n = strlen("{\"a\":") + 2 * arrays + 1;
    char *s = malloc(n + 1);
    cr_assert_not_null(s);
    memcpy(s, "{\"a\":", 5);
    memset(s + 5, '[', arrays);
    memset(s + 5 + arrays, ']', arrays);
    s[n - 1] = '}';
    s[n] = '\0';
    *len = n;
    return s;
}

Test(fields, nesting_of_max_depth_is_accepted) {
    size_t n;
    char *s = nested_object(SB_FIELDS_MAX_DEPTH, &n);
    sb_fields f;
    cr_expect_eq(parse(s, n, &f), STDIO_BUS_OK);
    free(s);
}

Test(fields, nesting_beyond_max_depth_is_rejected) {
    size_t n;
    char *s = nested_object(SB_FIELDS_MAX_DEPTH + 1, &n);
    sb_fields f;
    cr_expect_eq(parse(s, n, &f), STDIO_BUS_ERR);
    free(s);
}

Test(fields, nesting_limit_counts_arrays_and_objects_alike) {
    /* [[...]] of 1000 is valid JSON (not an object), 1001 is too deep; the
     * same for {"a":{"a":...}}. Matches cJSON's CJSON_NESTING_LIMIT. */
    for (size_t depth = SB_FIELDS_MAX_DEPTH - 1; depth <= SB_FIELDS_MAX_DEPTH + 1; depth++) {
        int want_ok = depth <= SB_FIELDS_MAX_DEPTH;
        char *s = malloc(2 * depth);
        sb_fields f;
        memset(s, '[', depth);
        memset(s + depth, ']', depth);
        cr_expect_eq(parse(s, 2 * depth, &f), want_ok ? STDIO_BUS_EINVAL : STDIO_BUS_ERR,
                     "arrays, depth %zu", depth);
        free(s);

        size_t n = 0;
        s = malloc(6 * depth + 2);
        for (size_t i = 0; i < depth - 1; i++) {
            memcpy(s + n, "{\"a\":", 5);
            n += 5;
        }
        s[n++] = '{';
        memset(s + n, '}', depth);
        n += depth;
        cr_expect_eq(parse(s, n, &f), want_ok ? STDIO_BUS_OK : STDIO_BUS_ERR, "objects, depth %zu",
                     depth);
        free(s);
    }
}

Test(fields, very_deep_input_fails_without_recursion) {
    size_t n = 10u * 1000 * 1000;
    char *s = malloc(n);
    sb_fields f;
    memset(s, '[', n);
    cr_expect_eq(sb_fields_parse(s, n, &f), STDIO_BUS_ERR);
    free(s);
}

/* ---- the routing fields ---------------------------------------------- */

Test(fields, all_five_fields_are_reported_with_their_raw_bytes) {
    sb_fields f;
    cr_assert_eq(parse_str("{\"jsonrpc\":\"2.0\",\"id\":42,\"sessionId\":\"s-1\","
                           "\"method\":\"tools/call\",\"result\":{\"a\":[1, 2]},"
                           "\"error\":{\"code\":-32600,\"message\":\"x\"}}",
                           &f),
                 STDIO_BUS_OK);
    expect_token(&f.id, SB_JSON_NUMBER, "42");
    expect_token(&f.session_id, SB_JSON_STRING, "\"s-1\"");
    expect_token(&f.method, SB_JSON_STRING, "\"tools/call\"");
    expect_token(&f.result, SB_JSON_OBJECT, "{\"a\":[1, 2]}");
    expect_token(&f.error, SB_JSON_OBJECT, "{\"code\":-32600,\"message\":\"x\"}");
}

Test(fields, absent_fields_are_absent) {
    sb_fields f;
    cr_assert_eq(parse_str("{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}", &f), STDIO_BUS_OK);
    expect_token(&f.method, SB_JSON_STRING, "\"ping\"");
    expect_absent(&f.id);
    expect_absent(&f.session_id);
    expect_absent(&f.result);
    expect_absent(&f.error);

    cr_assert_eq(parse_str("{}", &f), STDIO_BUS_OK);
    expect_all_absent(&f);
}

Test(fields, string_and_number_ids_are_distinct) {
    sb_fields f;
    cr_assert_eq(parse_str("{\"id\":\"1\"}", &f), STDIO_BUS_OK);
    expect_token(&f.id, SB_JSON_STRING, "\"1\"");
    cr_assert_eq(parse_str("{\"id\":1}", &f), STDIO_BUS_OK);
    expect_token(&f.id, SB_JSON_NUMBER, "1");
}

Test(fields, every_value_type_is_reported) {
    static const struct {
        const char *line;
        sb_json_type type;
        const char *raw;
    } cases[] = {
        {"{\"id\":\"x\"}", SB_JSON_STRING, "\"x\""},
        {"{\"id\":-12.5e-3}", SB_JSON_NUMBER, "-12.5e-3"},
        {"{\"id\":true}", SB_JSON_TRUE, "true"},
        {"{\"id\":false}", SB_JSON_FALSE, "false"},
        {"{\"id\":null}", SB_JSON_NULL, "null"},
        {"{\"id\":{}}", SB_JSON_OBJECT, "{}"},
        {"{\"id\":[]}", SB_JSON_ARRAY, "[]"},
        {"{\"id\":[ {\"id\":2} , [] ]}", SB_JSON_ARRAY, "[ {\"id\":2} , [] ]"},
        {"{\"id\":{\"id\":{\"id\":3}}}", SB_JSON_OBJECT, "{\"id\":{\"id\":3}}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sb_fields f;
        cr_assert_eq(parse_str(cases[i].line, &f), STDIO_BUS_OK, "%s", cases[i].line);
        expect_token(&f.id, cases[i].type, cases[i].raw);
    }
}

Test(fields, numbers_keep_their_exact_spelling) {
    static const char *const numbers[] = {
        "0",     "-0",      "1e5",
        "1E5",   "1e+5",    "1e-5",
        "-0.0",  "0.10",    "123456789012345678901234567890123456789012345678901234567890123456789",
        "1e999", "-1e-999", "9007199254740993",
    };
    for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++) {
        char line[256];
        sb_fields f;
        snprintf(line, sizeof line, "{\"id\":%s}", numbers[i]);
        cr_assert_eq(parse_str(line, &f), STDIO_BUS_OK, "%s", line);
        expect_token(&f.id, SB_JSON_NUMBER, numbers[i]);
        /* ... whatever follows the number */
        snprintf(line, sizeof line, "{\"id\" : %s ,\"x\":0}", numbers[i]);
        cr_assert_eq(parse_str(line, &f), STDIO_BUS_OK, "%s", line);
        expect_token(&f.id, SB_JSON_NUMBER, numbers[i]);
    }
}

Test(fields, strings_keep_their_quotes_and_escapes) {
    sb_fields f;
    cr_assert_eq(parse_str("{\"sessionId\":\"a\\\"b\\u0041\\\\\"}", &f), STDIO_BUS_OK);
    expect_token(&f.session_id, SB_JSON_STRING, "\"a\\\"b\\u0041\\\\\"");
}

Test(fields, only_top_level_keys_count) {
    sb_fields f;
    cr_assert_eq(parse_str("{\"params\":{\"id\":1,\"method\":\"x\"},\"list\":[{\"error\":1}]}", &f),
                 STDIO_BUS_OK);
    expect_all_absent(&f);

    /* A key-like string value is not a key. */
    cr_assert_eq(parse_str("{\"a\":\"id\",\"b\":[\"method\"]}", &f), STDIO_BUS_OK);
    expect_all_absent(&f);

    cr_assert_eq(parse_str("{\"params\":{\"id\":1},\"id\":2}", &f), STDIO_BUS_OK);
    expect_token(&f.id, SB_JSON_NUMBER, "2");
}

Test(fields, duplicate_keys_first_occurrence_wins) {
    sb_fields f;
    cr_assert_eq(parse_str("{\"id\":1,\"method\":\"a\",\"id\":\"2\",\"method\":{}}", &f),
                 STDIO_BUS_OK);
    expect_token(&f.id, SB_JSON_NUMBER, "1");
    expect_token(&f.method, SB_JSON_STRING, "\"a\"");

    /* Also when the first spelling is escaped. */
    cr_assert_eq(parse_str("{\"\\u0069d\":[1],\"id\":2}", &f), STDIO_BUS_OK);
    expect_token(&f.id, SB_JSON_ARRAY, "[1]");

    /* A duplicate after the document turns invalid does not matter. */
    cr_assert_eq(parse_str("{\"id\":1,\"id\":}", &f), STDIO_BUS_ERR);
}

Test(fields, keys_are_compared_by_their_decoded_value) {
    static const struct {
        const char *line;
        int is_session;
    } cases[] = {
        {"{\"sessi\\u006fnId\":\"s\"}", 1},
        {"{\"\\u0073\\u0065\\u0073\\u0073\\u0069\\u006F\\u006E\\u0049\\u0064\":\"s\"}", 1},
        {"{\"session\\u0049d\":\"s\"}", 1},
        {"{\"sessionid\":\"s\"}", 0},        /* case matters */
        {"{\"session\\u0069d\":\"s\"}", 0},  /* \u0069 is 'i', not 'I' */
        {"{\"sessionId\\u0000\":\"s\"}", 0}, /* cJSON would truncate; we don't */
        {"{\"sessionI\":\"s\"}", 0},
        {"{\"sessionIdd\":\"s\"}", 0},
        {"{\"session\\/Id\":\"s\"}", 0},
        {"{\"\\u00e9sessionId\":\"s\"}", 0},
        {"{\" sessionId\":\"s\"}", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sb_fields f;
        cr_assert_eq(parse_str(cases[i].line, &f), STDIO_BUS_OK, "%s", cases[i].line);
        if (cases[i].is_session)
            expect_token(&f.session_id, SB_JSON_STRING, "\"s\"");
        else
            expect_absent(&f.session_id);
    }
}

Test(fields, every_routing_key_can_be_escaped) {
    sb_fields f;
    cr_assert_eq(parse_str("{\"\\u0069\\u0064\":1,\"\\u0073essionId\":\"s\","
                           "\"\\u006dethod\":\"m\",\"resul\\u0074\":2,\"erro\\u0072\":3}",
                           &f),
                 STDIO_BUS_OK);
    expect_token(&f.id, SB_JSON_NUMBER, "1");
    expect_token(&f.session_id, SB_JSON_STRING, "\"s\"");
    expect_token(&f.method, SB_JSON_STRING, "\"m\"");
    expect_token(&f.result, SB_JSON_NUMBER, "2");
    expect_token(&f.error, SB_JSON_NUMBER, "3");
}

Test(fields, whitespace_around_values_is_not_part_of_the_token) {
    sb_fields f;
    cr_assert_eq(parse_str(" {\t\"id\" :\r\n \"x\" \n, \"method\"\t:\tnull\r}\r", &f),
                 STDIO_BUS_OK);
    expect_token(&f.id, SB_JSON_STRING, "\"x\"");
    expect_token(&f.method, SB_JSON_NULL, "null");
}

Test(fields, a_long_line_is_scanned_exactly) {
    /* Exercises the word-at-a-time string skip at every alignment and
     * with the stop byte at every position within a word. */
    for (size_t len = 0; len < 40; len++) {
        for (size_t at = 0; at < len; at++) {
            char body[64];
            char line[128];
            sb_fields f;
            memset(body, 'x', len);
            body[len] = '\0';
            int n = snprintf(line, sizeof line, "{\"method\":\"%s\"}", body);
            cr_assert_eq(parse(line, (size_t)n, &f), STDIO_BUS_OK);
            cr_assert_eq(f.method.raw_len, len + 2);
            {
                body[at] = '\x1f'; /* a control character anywhere is caught */
                n = snprintf(line, sizeof line, "{\"method\":\"%s\"}", body);
                cr_assert_eq(parse(line, (size_t)n, &f), STDIO_BUS_ERR, "len %zu at %zu", len, at);
                body[at] = '\\'; /* so is a bad escape */
                n = snprintf(line, sizeof line, "{\"method\":\"%s\"}", body);
                cr_assert_eq(parse(line, (size_t)n, &f), STDIO_BUS_ERR);
                body[at] = '"'; /* and an early end of the string */
                n = snprintf(line, sizeof line, "{\"method\":\"%s\"}", body);
                cr_assert_eq(parse(line, (size_t)n, &f), STDIO_BUS_ERR);
            }
        }
    }
}

/* ---- the padded copy and the block-wise string scan ------------------ */

/* Lines up to SB_FIELDS_PAD_MAX bytes (fields.h) are scanned from a
 * zero-padded copy, longer ones in place (src/base/fields.c). */

/* Builds {"method":"xx...x"} of exactly n bytes (n >= 13) in a new buffer;
 * the string body is n - 13 bytes long and starts at offset 11. */
static char *method_line(size_t n) {
    char *s = malloc(n);
    cr_assert_not_null(s);
    cr_assert(n >= 13);
    memcpy(s, "{\"method\":\"", 11);
    memset(s + 11, 'x', n - 13);
    memcpy(s + n - 2, "\"}", 2);
    return s;
}

Test(fields, lines_on_both_sides_of_the_padding_limit) {
    size_t lengths[] = {SB_FIELDS_PAD_MAX - 1, SB_FIELDS_PAD_MAX, SB_FIELDS_PAD_MAX + 1,
                        SB_FIELDS_PAD_MAX + 2};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
        size_t n = lengths[i];
        if (n < 13 || n > SIZE_MAX / 2)
            continue; /* a tiny SB_FIELDS_PAD_MAX: nothing to build */
        char *s = method_line(n);
        sb_fields f;

        cr_assert_eq(parse(s, n, &f), STDIO_BUS_OK, "len %zu", n);
        cr_assert_eq(f.method.raw, guarded + 10, "len %zu", n);
        cr_assert_eq(f.method.raw_len, n - 11, "len %zu", n);
        /* The last byte a NUL instead of the closing brace. */
        s[n - 1] = '\0';
        cr_expect_eq(parse(s, n, &f), STDIO_BUS_ERR, "len %zu", n);
        /* The line ends inside the string: its last byte is a body byte. */
        s[n - 2] = 'x';
        s[n - 1] = 'x';
        cr_expect_eq(parse(s, n, &f), STDIO_BUS_ERR, "len %zu", n);
        /* The line ends just after the string's closing quote. */
        s[n - 1] = '"';
        cr_expect_eq(parse(s, n, &f), STDIO_BUS_ERR, "len %zu", n);
        free(s);
    }
}

Test(fields, a_nul_as_the_last_byte_of_a_short_line_is_rejected) {
    static const char *const lines[] = {"{}", "{\"id\":1}", "[1]", "1", "\"s\"", "true"};
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
        char s[32];
        size_t n = strlen(lines[i]);
        sb_fields f;
        memcpy(s, lines[i], n);
        s[n] = '\0'; /* part of the line: len counts it */
        cr_expect_eq(parse(s, n + 1, &f), STDIO_BUS_ERR, "%s\\0", lines[i]);
        /* and so is a NUL followed by whitespace */
        s[n + 1] = ' ';
        cr_expect_eq(parse(s, n + 2, &f), STDIO_BUS_ERR, "%s\\0 ", lines[i]);
    }
}

Test(fields, strings_ending_exactly_at_the_end_of_the_line) {
    /* An unterminated string whose body runs to the last byte, for body
     * lengths around the 8/16/64-byte steps, on both sides of the limit. */
    for (size_t body = 0; body <= 140; body++) {
        for (int in_place = 0; in_place <= 1; in_place++) {
            size_t pad = in_place ? SB_FIELDS_PAD_MAX + 1 : 0;
            size_t n = pad + 11 + body;
            char *s = malloc(n + 2);
            sb_fields f;
            memset(s, ' ', pad);
            memcpy(s + pad, "{\"method\":\"", 11);
            memset(s + pad + 11, 'y', body);
            cr_expect_eq(parse(s, n, &f), STDIO_BUS_ERR, "body %zu in place %d", body, in_place);
            s[n] = '"'; /* closed, but the object is not */
            cr_expect_eq(parse(s, n + 1, &f), STDIO_BUS_ERR, "body %zu", body);
            s[n + 1] = '}';
            cr_expect_eq(parse(s, n + 2, &f), STDIO_BUS_OK, "body %zu", body);
            cr_expect_eq(f.method.raw_len, body + 2);
            free(s);
        }
    }
}

Test(fields, a_stop_byte_at_every_position_of_a_long_string) {
    static const size_t lengths[] = {15, 16, 17, 63, 64, 65, 127, 128, 129};
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
        size_t len = lengths[li];
        for (int in_place = 0; in_place <= 1; in_place++) {
            /* Leading whitespace pushes the line past the limit. */
            size_t pad = in_place ? SB_FIELDS_PAD_MAX + 1 : 0;
            size_t n = pad + 11 + len + 2;
            char *s = malloc(n);
            char *body = s + pad + 11;
            sb_fields f;
            memset(s, ' ', pad);
            memcpy(s + pad, "{\"method\":\"", 11);
            memcpy(s + n - 2, "\"}", 2);
            for (size_t at = 0; at < len; at++) {
                static const char stops[] = {'"', '\\', '\x1f', '\0', '\x01'};
                memset(body, 'x', len);
                cr_assert_eq(parse(s, n, &f), STDIO_BUS_OK);
                cr_assert_eq(f.method.raw_len, len + 2);
                for (size_t k = 0; k < sizeof stops; k++) {
                    body[at] = stops[k]; /* '\\' then 'x' is a bad escape */
                    cr_assert_eq(parse(s, n, &f), STDIO_BUS_ERR,
                                 "len %zu, byte 0x%02x at %zu, in place %d", len,
                                 (unsigned char)stops[k], at, in_place);
                }
                /* Bytes that do not stop a string, at the same place. */
                body[at] = '\x7f';
                cr_assert_eq(parse(s, n, &f), STDIO_BUS_OK, "0x7f at %zu", at);
                body[at] = '\xa2'; /* '"' with the top bit set */
                cr_assert_eq(parse(s, n, &f), STDIO_BUS_OK, "0xa2 at %zu", at);
                body[at] = '\xdc'; /* '\\' with the top bit set */
                cr_assert_eq(parse(s, n, &f), STDIO_BUS_OK, "0xdc at %zu", at);
                body[at] = ' ';
                cr_assert_eq(parse(s, n, &f), STDIO_BUS_OK, "' ' at %zu", at);
                body[at] = '#'; /* 0x23, which the scan swaps with '!' */
                cr_assert_eq(parse(s, n, &f), STDIO_BUS_OK, "'#' at %zu", at);
                if (at + 1 < len) { /* a valid escape: the scan goes on */
                    body[at] = '\\';
                    body[at + 1] = 'n';
                    cr_assert_eq(parse(s, n, &f), STDIO_BUS_OK, "\\n at %zu", at);
                    cr_assert_eq(f.method.raw_len, len + 2);
                    body[at + 1] = '"'; /* an escaped quote */
                    cr_assert_eq(parse(s, n, &f), STDIO_BUS_OK, "\\\" at %zu", at);
                }
            }
            free(s);
        }
    }
}

Test(fields, tokens_point_into_the_callers_line_not_a_copy) {
    static const char line[] = "{\"jsonrpc\":\"2.0\",\"id\":12345,\"method\":\"tools/call\","
                               "\"sessionId\":\"sess-1\",\"result\":[1],\"error\":{\"a\":null}}";
    size_t n = sizeof line - 1;
    for (int in_place = 0; in_place <= 1; in_place++) {
        size_t pad = in_place ? SB_FIELDS_PAD_MAX + 1 : 0;
        char *s = malloc(pad + n);
        sb_fields f;
        memset(s, '\n', pad);
        memcpy(s + pad, line, n);
        /* Straight on the caller's buffer, not via parse()'s copy. */
        cr_assert_eq(sb_fields_parse(s, pad + n, &f), STDIO_BUS_OK);
        cr_expect_eq(f.id.raw, s + pad + strlen("{\"jsonrpc\":\"2.0\",\"id\":"));
        cr_expect_eq(f.method.raw, s + pad + (strstr(line, "\"tools/call\"") - line));
        cr_expect_eq(f.session_id.raw, s + pad + (strstr(line, "\"sess-1\"") - line));
        cr_expect_eq(f.result.raw, s + pad + (strstr(line, "[1]") - line));
        cr_expect_eq(f.error.raw, s + pad + (strstr(line, "{\"a\"") - line));
        cr_expect_eq(f.error.raw_len, strlen("{\"a\":null}"));
        free(s);
    }
}

/* SB-I-45: the plain flag tells the pending table which ids need no
 * canonical form; it must be exact, or value-equal ids would miss each
 * other. */
Test(fields, plain_flag_marks_ids_that_are_their_own_value) {
    static const struct {
        const char *line;
        int plain;
    } cases[] = {
        {"{\"id\":1}", 1},
        {"{\"id\":-12}", 1},
        {"{\"id\":123456789012345}", 1},
        {"{\"id\":1234567890123456}", 0},
        {"{\"id\":-123456789012345}", 1},
        {"{\"id\":1.0}", 0},
        {"{\"id\":1e3}", 0},
        {"{\"id\":1E3}", 0},
        {"{\"id\":-0}", 0},
        {"{\"id\":0}", 1},
        {"{\"id\":\"a\"}", 1},
        {"{\"id\":\"\\u0061\"}", 0},
        {"{\"id\":\"a\\/b\"}", 0},
        {"{\"id\":null}", 1},
        {"{\"x\":1.5,\"id\":7,\"y\":\"\\n\"}", 1},
        {"{\"x\":\"\\n\",\"id\":\"q\"}", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sb_fields f;
        cr_assert_eq(parse_str(cases[i].line, &f), STDIO_BUS_OK, "%s", cases[i].line);
        int plain = sb_idkey_of(f.id.raw, f.id.raw_len, f.id.plain).plain;
        cr_assert_eq(plain, cases[i].plain, "%s: plain %d", cases[i].line, plain);
    }
}
