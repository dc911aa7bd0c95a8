/* Strict JSON checks and raw tokens (see ref_json.h). */
#include "ref_json.h"

#include <stdbool.h>
#include <string.h>

#include "common/status.h"

typedef struct scan {
    const unsigned char *p, *end;
    int depth;
    int err; /* first error, MC_OK while none */
} scan;

static bool fail(scan *s, int err) {
    if (s->err == MC_OK)
        s->err = err;
    return false;
}

static void skip_ws(scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static bool is_hex(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* One UTF-8 sequence starting at a byte >= 0x80: well-formed, shortest
 * form, no surrogates, at most U+10FFFF (RFC 3629). */
static bool utf8_seq(scan *s) {
    const unsigned char *p = s->p;
    size_t left = (size_t)(s->end - p);
    unsigned char c = p[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        if (c == 0xF4)
            hi = 0x8F; /* > U+10FFFF */
    } else
        return fail(s, REF_JSON_EUTF8);
    if (left < len || p[1] < lo || p[1] > hi)
        return fail(s, REF_JSON_EUTF8);
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return fail(s, REF_JSON_EUTF8);
    s->p += len;
    return true;
}

static bool string(scan *s) {
    s->p++; /* opening quote */
    while (s->p < s->end) {
        unsigned char c = *s->p;
        if (c == '"') {
            s->p++;
            return true;
        }
        if (c < 0x20)
            return fail(s, REF_JSON_ESYNTAX); /* raw control character */
        if (c == '\\') {
            if (s->end - s->p < 2)
                return fail(s, REF_JSON_ESYNTAX);
            unsigned char e = s->p[1];
            if (e == 'u') {
                if (s->end - s->p < 6 || !is_hex(s->p[2]) || !is_hex(s->p[3]) || !is_hex(s->p[4]) ||
                    !is_hex(s->p[5]))
                    return fail(s, REF_JSON_ESYNTAX);
                s->p += 6;
            } else if (strchr("\"\\/bfnrt", e) && e) {
                s->p += 2;
            } else
                return fail(s, REF_JSON_ESYNTAX);
            continue;
        }
        if (c >= 0x80) {
            if (!utf8_seq(s))
                return false;
            continue;
        }
        s->p++;
    }
    return fail(s, REF_JSON_ESYNTAX); /* unterminated */
}

static bool digits(scan *s) {
    const unsigned char *start = s->p;
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
        s->p++;
    return s->p > start;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool number(scan *s) {
    if (*s->p == '-')
        s->p++;
    if (s->p >= s->end)
        return fail(s, REF_JSON_ESYNTAX);
    if (*s->p == '0')
        s->p++;
    else if (!digits(s))
        return fail(s, REF_JSON_ESYNTAX);
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (!digits(s))
            return fail(s, REF_JSON_ESYNTAX);
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
            s->p++;
        if (!digits(s))
            return fail(s, REF_JSON_ESYNTAX);
    }
    return true;
}

static bool literal(scan *s, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
        return fail(s, REF_JSON_ESYNTAX);
    s->p += n;
    return true;
}

static bool value(scan *s);

/* Object or array, after its opening bracket. */
static bool container(scan *s, bool object) {
    if (++s->depth > REF_JSON_MAX_DEPTH)
        return fail(s, REF_JSON_EDEPTH);
    unsigned char close = object ? '}' : ']';
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        s->depth--;
        return true;
    }
    for (;;) {
        if (object) {
            if (s->p >= s->end || *s->p != '"' || !string(s))
                return fail(s, REF_JSON_ESYNTAX);
            skip_ws(s);
            if (s->p >= s->end || *s->p != ':')
                return fail(s, REF_JSON_ESYNTAX);
            s->p++;
            skip_ws(s);
        }
        if (!value(s))
            return false;
        skip_ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            skip_ws(s);
            continue;
        }
        if (s->p < s->end && *s->p == close) {
            s->p++;
            s->depth--;
            return true;
        }
        return fail(s, REF_JSON_ESYNTAX);
    }
}

/* One value at s->p (no leading whitespace). */
static bool value(scan *s) {
    if (s->p >= s->end)
        return fail(s, REF_JSON_ESYNTAX);
    switch (*s->p) {
    case '{':
        return container(s, true);
    case '[':
        return container(s, false);
    case '"':
        return string(s);
    case 't':
        return literal(s, "true");
    case 'f':
        return literal(s, "false");
    case 'n':
        return literal(s, "null");
    default:
        if (*s->p == '-' || (*s->p >= '0' && *s->p <= '9'))
            return number(s);
        return fail(s, REF_JSON_ESYNTAX);
    }
}

int ref_json_check(const char *p, size_t n) {
    scan s = {(const unsigned char *)p, (const unsigned char *)p + n, 0, MC_OK};
    skip_ws(&s);
    if (!value(&s))
        return s.err;
    skip_ws(&s);
    return s.p == s.end ? MC_OK : REF_JSON_ESYNTAX;
}

const char *ref_json_strerror(int code) {
    switch (code) {
    case REF_JSON_EUTF8:
        return "not UTF-8";
    case REF_JSON_EDEPTH:
        return "nested too deeply";
    default:
        return "not valid JSON";
    }
}

/* The index-th value inside a checked object or array text. */
static int nth(ref_span text, size_t index, bool object, ref_span *out) {
    scan s = {(const unsigned char *)text.p, (const unsigned char *)text.p + text.n, 0, MC_OK};
    skip_ws(&s);
    if (s.p >= s.end || *s.p != (object ? '{' : '['))
        return MC_ENOTFOUND;
    s.p++;
    for (size_t i = 0;; i++) {
        skip_ws(&s);
        if (s.p >= s.end || *s.p == (object ? '}' : ']'))
            return MC_ENOTFOUND;
        if (object) {
            if (*s.p != '"' || !string(&s))
                return MC_ENOTFOUND;
            skip_ws(&s);
            s.p++; /* ':' */
            skip_ws(&s);
        }
        const unsigned char *start = s.p;
        s.depth = 0;
        if (!value(&s))
            return MC_ENOTFOUND;
        if (i == index) {
            out->p = (const char *)start;
            out->n = (size_t)(s.p - start);
            return MC_OK;
        }
        skip_ws(&s);
        if (s.p >= s.end || *s.p != ',')
            return MC_ENOTFOUND;
        s.p++;
    }
}

int ref_json_member(ref_span text, size_t index, ref_span *value) {
    return nth(text, index, true, value);
}

int ref_json_element(ref_span text, size_t index, ref_span *value) {
    return nth(text, index, false, value);
}

const cJSON *ref_json_get(const cJSON *obj, ref_span raw, const char *key, ref_span *value) {
    value->p = NULL;
    value->n = 0;
    if (!cJSON_IsObject(obj))
        return NULL;
    size_t index = 0;
    for (const cJSON *it = obj->child; it; it = it->next, index++) {
        if (it->string && strcmp(it->string, key) == 0) {
            if (ref_json_member(raw, index, value) != MC_OK)
                return NULL; /* cannot happen for a checked text */
            return it;
        }
    }
    return NULL;
}
