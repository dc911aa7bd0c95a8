#include "scan.h"

#include <string.h>

static int is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && is_ws(*p))
        p++;
    return p;
}

/* p is at the opening quote. Returns the byte after the closing quote, or
 * NULL. A quote is escaped when an odd run of backslashes precedes it; the
 * run cannot reach back past `from`, which is the opening quote or an
 * escaped quote. */
static const char *skip_string(const char *p, const char *end) {
    const char *from = p + 1;
    for (;;) {
        const char *q = memchr(from, '"', (size_t)(end - from));
        if (!q)
            return NULL;
        const char *b = q;
        while (b > from && b[-1] == '\\')
            b--;
        if (((q - b) & 1) == 0)
            return q + 1;
        from = q + 1;
    }
}

static const char *skip_value(const char *p, const char *end) {
    if (p >= end)
        return NULL;
    if (*p == '"')
        return skip_string(p, end);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (p < end) {
            char c = *p;
            if (c == '"') {
                p = skip_string(p, end);
                if (!p)
                    return NULL;
                continue;
            }
            if (c == '{' || c == '[')
                depth++;
            else if ((c == '}' || c == ']') && --depth == 0)
                return p + 1;
            p++;
        }
        return NULL;
    }
    const char *start = p;
    while (p < end && *p != ',' && *p != '}' && *p != ']' && !is_ws(*p))
        p++;
    return p > start ? p : NULL;
}

static int key_is(const char *k, size_t n, const char *want) {
    size_t w = strlen(want);
    return n == w && memcmp(k, want, w) == 0;
}

int bench_scan_fields(const char *line, size_t len, bench_fields *out) {
    const char *p = line, *end = line + len;
    memset(out, 0, sizeof *out);
    p = skip_ws(p, end);
    if (p >= end || *p != '{')
        return -1;
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}')
        return 0;
    for (;;) {
        if (p >= end || *p != '"')
            return -1;
        const char *key = p + 1;
        p = skip_string(p, end);
        if (!p)
            return -1;
        size_t key_len = (size_t)(p - 1 - key);
        p = skip_ws(p, end);
        if (p >= end || *p != ':')
            return -1;
        p = skip_ws(p + 1, end);
        const char *value = p;
        p = skip_value(p, end);
        if (!p)
            return -1;
        bench_span span = {value, (size_t)(p - value)};
        bench_span *slot = NULL;
        if (key_is(key, key_len, "id"))
            slot = &out->id;
        else if (key_is(key, key_len, "sessionId"))
            slot = &out->session_id;
        else if (key_is(key, key_len, "params"))
            slot = &out->params;
        else if (key_is(key, key_len, "result"))
            slot = &out->result;
        if (slot && !slot->p) /* the first occurrence wins, as in the daemon */
            *slot = span;
        p = skip_ws(p, end);
        if (p < end && *p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == '}')
            return 0;
        return -1;
    }
}
