/* Unit tests for the canonical form of ids (src/base/idkey.c, SB-I-45): ids of
 * one JSON value get the same bytes, ids of different values never do. */
#include <criterion/criterion.h>

#include <string.h>

#include "idkey.h"

static size_t canon(const char *raw, char *buf, const char **out) {
    return sb_idkey_canon(sb_idkey_raw(raw, strlen(raw)), buf, out);
}

static void expect_same(const char *a, const char *b) {
    char ba[SB_IDKEY_MAX], bb[SB_IDKEY_MAX];
    const char *ca, *cb;
    size_t na = canon(a, ba, &ca), nb = canon(b, bb, &cb);
    cr_assert(na == nb && memcmp(ca, cb, na) == 0, "%s and %s: \"%.*s\" vs \"%.*s\"", a, b, (int)na,
              ca, (int)nb, cb);
}

static void expect_differ(const char *a, const char *b) {
    char ba[SB_IDKEY_MAX], bb[SB_IDKEY_MAX];
    const char *ca, *cb;
    size_t na = canon(a, ba, &ca), nb = canon(b, bb, &cb);
    cr_assert(na != nb || memcmp(ca, cb, na) != 0, "%s and %s share \"%.*s\"", a, b, (int)na, ca);
}

Test(idkey, plain_tokens_are_their_own_form_and_copy_nothing) {
    static const char *plain[] = {"1",       "-17",  "0",    "123456789012345",
                                  "\"abc\"", "\"\"", "null", "\"caf\xc3\xa9\""};
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++) {
        char buf[SB_IDKEY_MAX];
        const char *c;
        size_t n = canon(plain[i], buf, &c);
        cr_assert_eq(c, plain[i], "%s was copied", plain[i]);
        cr_assert_eq(n, strlen(plain[i]));
    }
}

Test(idkey, numbers_of_one_value_meet) {
    expect_same("1", "1.0");
    expect_same("1", "1e0");
    expect_same("1", "10e-1");
    expect_same("100", "1E2");
    expect_same("0", "-0");
    expect_same("0", "0.0e5");
    expect_same("-3", "-3.000");
    expect_same("1234567890123456", "1234567890123456.0");       /* 16 digits, still exact */
    expect_same("12345678901234567890", "12345678901234567891"); /* one double */
    expect_same("0.5", "5e-1");
}

Test(idkey, strings_of_one_value_meet) {
    expect_same("\"a\"", "\"\\u0061\"");
    expect_same("\"/\"", "\"\\/\"");
    expect_same("\"\\n\"", "\"\\u000a\"");
    expect_same("\"\\u00e9\"", "\"\xc3\xa9\"");
    expect_same("\"\\ud83d\\ude00\"", "\"\xf0\x9f\x98\x80\"");
    expect_same("\"\\\"\"", "\"\\u0022\"");
}

Test(idkey, different_values_stay_apart) {
    expect_differ("1", "\"1\"");
    expect_differ("1", "2");
    expect_differ("1.5", "1.25");
    expect_differ("\"a\"", "\"A\"");
    expect_differ("null", "\"null\"");
    expect_differ("\"a\\u0000b\"", "\"a\\u0000c\"");
    expect_differ("0", "\"\"");
    expect_differ("\"\\\\u0061\"", "\"a\""); /* an escaped backslash, then u0061 */
}

Test(idkey, malformed_escapes_fall_back_to_the_raw_token) {
    char buf[SB_IDKEY_MAX];
    const char *c;
    const char *raw = "\"\\q\"";
    cr_assert_eq(canon(raw, buf, &c), strlen(raw));
    cr_assert_eq(c, raw);
    raw = "\"\\u12\"";
    cr_assert_eq(canon(raw, buf, &c), strlen(raw));
    cr_assert_eq(c, raw);
}
