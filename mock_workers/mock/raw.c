/* Raw JSON token finder (see raw.h). */
#include "raw.h"

#include <string.h>

#include "common/status.h"

static int is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && is_ws(s[i]))
        i++;
    return i;
}

/* s[i] is '"'. Returns the index just past the closing quote, or 0 if the
 * string is unterminated (a string always ends at index >= 2). */
static size_t skip_string(const char *s, size_t n, size_t i) {
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return 0;
}

/* Returns the index just past the value starting at s[i], or 0 on error. */
static size_t skip_value(const char *s, size_t n, size_t i) {
    if (i >= n)
        return 0;
    if (s[i] == '"')
        return skip_string(s, n, i);
    if (s[i] == '{' || s[i] == '[') {
        size_t depth = 0;
        while (i < n) {
            char c = s[i];
            if (c == '"') {
                i = skip_string(s, n, i);
                if (i == 0)
                    return 0;
                continue;
            }
            if (c == '{' || c == '[') {
                depth++;
            } else if (c == '}' || c == ']') {
                if (--depth == 0)
                    return i + 1;
            }
            i++;
        }
        return 0;
    }
    size_t start = i;
    while (i < n && !is_ws(s[i]) && s[i] != ',' && s[i] != '}' && s[i] != ']')
        i++;
    return i > start ? i : 0;
}

int mw_raw_field(const char *s, size_t n, const char *key, mw_span *out) {
    size_t klen = strlen(key);
    size_t i = skip_ws(s, n, 0);
    if (i >= n || s[i] != '{')
        return MC_EINVAL;
    i = skip_ws(s, n, i + 1);
    while (i < n && s[i] == '"') {
        size_t kstart = i + 1;
        size_t kend = skip_string(s, n, i);
        if (kend == 0)
            return MC_EINVAL;
        i = skip_ws(s, n, kend);
        if (i >= n || s[i] != ':')
            return MC_EINVAL;
        i = skip_ws(s, n, i + 1);
        size_t vstart = i;
        i = skip_value(s, n, i);
        if (i == 0)
            return MC_EINVAL;
        if (kend - 1 - kstart == klen && memcmp(s + kstart, key, klen) == 0) {
            out->p = s + vstart;
            out->n = i - vstart;
            return MC_OK;
        }
        i = skip_ws(s, n, i);
        if (i >= n || s[i] != ',')
            break;
        i = skip_ws(s, n, i + 1);
    }
    return MC_ENOTFOUND;
}

mw_span mw_raw_trim(const char *s, size_t n) {
    while (n > 0 && is_ws(s[0])) {
        s++;
        n--;
    }
    while (n > 0 && is_ws(s[n - 1]))
        n--;
    mw_span sp = {s, n};
    return sp;
}
