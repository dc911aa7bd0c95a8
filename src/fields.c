/* Routing-field extraction (spec 2.2, 4.2.2, 4.3): one pass over the line
 * that both validates it as JSON and notes where the top-level routing
 * fields sit. Modelled on picohttpparser: pure, allocation-free, tokens are
 * pointer/length pairs into the caller's buffer.
 *
 * What counts as valid is RFC 8259, strictly, except where cJSON 1.7.15
 * (the daemon's config parser and the fuzz oracle) is stricter still:
 *   - whitespace is space, tab, CR and LF only; any other byte < 0x20
 *     outside a string, and any byte < 0x20 inside one, is an error;
 *   - no trailing commas, comments, leading zeros, '+', NaN or Infinity;
 *   - a \u escape needs 4 hex digits; a UTF-16 surrogate escape must be a
 *     high one immediately followed by a low one (cJSON rejects "\ud800"
 *     and "\udc00" alone, and so do we, although the RFC grammar allows
 *     them);
 *   - UTF-8 is not validated: bytes >= 0x80 pass through, as in cJSON;
 *   - a UTF-8 byte order mark is an error (cJSON skips one; RFC 8259 8.1
 *     lets a parser do either, and a BOM in the middle of a stream of
 *     lines is a client bug we would rather report);
 *   - at most SB_FIELDS_MAX_DEPTH nested arrays/objects, the top-level
 *     one included: the same limit as CJSON_NESTING_LIMIT (1000 ok, 1001
 *     rejected);
 *   - a key containing \u0000 matches no routing field (cJSON would
 *     truncate "id\u0000x" to "id"; we compare the full decoded key). */
#include "fields.h"

#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "status.h"

#define IS_WS(c) ((c) == ' ' || (c) == '\n' || (c) == '\r' || (c) == '\t')
#define IS_DIGIT(c) ((unsigned)((c) - '0') < 10u)
#define SKIP_WS(p, end)                       \
    do {                                      \
        while ((p) < (end) && IS_WS(*(p)))    \
            (p)++;                            \
    } while (0)

/* Whether the innermost open container (depth >= 1) is an object. */
#define IN_OBJECT(stack, depth) \
    ((stack)[((depth) - 1) >> 3] & (1u << (((depth) - 1) & 7)))

/* Word-at-a-time tests (Hacker's Delight 6-1): each is non-zero exactly when
 * some byte of v is zero / below n (n <= 128). */
#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)
#define HAS_ZERO(v) (((v) - ONES) & ~(v) & HIGHS)
#define HAS_LESS(v, n) (((v) - ONES * (n)) & ~(v) & HIGHS)

/* The value of one hex digit, or -1. */
static inline int hex_digit(unsigned c)
{
    if (c - '0' < 10u)
        return (int)(c - '0');
    c |= 0x20; /* fold to lower case */
    if (c - 'a' < 6u)
        return (int)(c - 'a' + 10);
    return -1;
}

/* The code unit of the 4 hex digits at p, or -1 if fewer than 4 bytes
 * remain or one is not a hex digit. */
static inline long hex4(const unsigned char *p, const unsigned char *end)
{
    long v = 0;
    if (end - p < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(p[i]);
        if (d < 0)
            return -1;
        v = (v << 4) | d;
    }
    return v;
}

/* Checks the escape whose backslash is at p[-1]; returns the byte after it,
 * or NULL if it is invalid. */
static const unsigned char *scan_escape(const unsigned char *p,
                                        const unsigned char *end)
{
    long hi, lo;

    if (p == end)
        return NULL;
    switch (*p) {
    case '"': case '\\': case '/':
    case 'b': case 'f': case 'n': case 'r': case 't':
        return p + 1;
    case 'u':
        hi = hex4(p + 1, end);
        if (hi < 0)
            return NULL;
        p += 5;
        if (hi >= 0xDC00 && hi <= 0xDFFF)
            return NULL; /* a low surrogate with no high one before it */
        if (hi < 0xD800 || hi > 0xDBFF)
            return p;
        /* A high surrogate: as in cJSON, its low half must follow at once. */
        if (end - p < 6 || p[0] != '\\' || p[1] != 'u')
            return NULL;
        lo = hex4(p + 2, end);
        if (lo < 0xDC00 || lo > 0xDFFF)
            return NULL;
        return p + 6;
    default:
        return NULL;
    }
}

/* Scans a string body whose opening quote is at p[-1]. Returns the byte
 * after the closing quote, or NULL if the string is invalid or unterminated.
 * Sets *escaped when the body holds a backslash. */
static inline const unsigned char *scan_string(const unsigned char *p,
                                               const unsigned char *end,
                                               int *escaped)
{
    for (;;) {
        /* Most bytes of a message are string bodies: skip 8 ordinary bytes
         * at a time, then find the stop byte one by one. */
#ifdef __SSE2__
        {
            const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
            const __m128i ctl = _mm_set1_epi8(0x1f);
            while (end - p >= 16) {
                __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
                __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote),
                                                         _mm_cmpeq_epi8(v, bslash)),
                                            _mm_cmpeq_epi8(_mm_min_epu8(v, ctl), v));
                unsigned m = (unsigned)_mm_movemask_epi8(stop);
                if (m) {
                    p += __builtin_ctz(m);
                    goto stop_byte;
                }
                p += 16;
            }
        }
#endif
        while (end - p >= 8) {
            uint64_t v, m;
            memcpy(&v, p, sizeof v);
            m = HAS_ZERO(v ^ (ONES * '"')) | HAS_ZERO(v ^ (ONES * '\\')) | HAS_LESS(v, 0x20);
            if (m) { /* the lowest flagged byte is exact (borrows only go up) */
                p += __builtin_ctzll(m) >> 3;
                goto stop_byte;
            }
            p += 8;
        }
        while (p < end && *p >= 0x20 && *p != '"' && *p != '\\')
            p++;
    stop_byte:
        if (p == end)
            return NULL;
        if (*p == '"')
            return p + 1;
        if (*p < 0x20)
            return NULL; /* RFC 8259 7: control characters must be escaped */
        *escaped = 1;
        p = scan_escape(p + 1, end);
        if (p == NULL)
            return NULL;
    }
}

/* Whether the escaped key k[0..n) (already validated) decodes to lit. The
 * routing keys are ASCII, so an escape that decodes to anything else
 * cannot match and the decoder never needs to produce UTF-8. */
static int key_equals(const unsigned char *k, size_t n, const char *lit)
{
    const unsigned char *end = k + n;

    while (k < end) {
        unsigned c = *k++;
        if (c == '\\') {
            c = *k++;
            switch (c) {
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u':
                c = (unsigned)hex4(k, end);
                k += 4;
                if (c >= 0x80)
                    return 0;
                break;
            default: break; /* '"', '\\' and '/' stand for themselves */
            }
        }
        if (*lit == '\0' || (unsigned char)*lit != c)
            return 0;
        lit++;
    }
    return *lit == '\0';
}

/* Unaligned loads for comparing short keys (memcpy compiles to one mov). */
static inline uint32_t load32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t load64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The routing field a top-level key names, or NULL. */
static sb_token *key_slot(sb_fields *out, const unsigned char *k, size_t n,
                          int escaped)
{
    if (escaped) {
        if (key_equals(k, n, "id"))
            return &out->id;
        if (key_equals(k, n, "sessionId"))
            return &out->session_id;
        if (key_equals(k, n, "method"))
            return &out->method;
        if (key_equals(k, n, "result"))
            return &out->result;
        if (key_equals(k, n, "error"))
            return &out->error;
        return NULL;
    }
    switch (n) {
    case 2:
        return k[0] == 'i' && k[1] == 'd' ? &out->id : NULL;
    case 5:
        return load32(k) == load32("erro") && k[4] == 'r' ? &out->error : NULL;
    case 6:
        if (load32(k) == load32("meth") && k[4] == 'o' && k[5] == 'd')
            return &out->method;
        return load32(k) == load32("resu") && k[4] == 'l' && k[5] == 't' ? &out->result : NULL;
    case 9:
        return load64(k) == load64("sessionI") && k[8] == 'd' ? &out->session_id : NULL;
    default:
        return NULL;
    }
}

/* The type of the value that starts with byte c (only meaningful when the
 * value then parses). */
static sb_json_type type_of(unsigned char c)
{
    switch (c) {
    case '{': return SB_JSON_OBJECT;
    case '[': return SB_JSON_ARRAY;
    case '"': return SB_JSON_STRING;
    case 't': return SB_JSON_TRUE;
    case 'f': return SB_JSON_FALSE;
    case 'n': return SB_JSON_NULL;
    default: return SB_JSON_NUMBER;
    }
}

/* The parser is a loop over three states (a value is expected, a member
 * key is expected, a value just ended) with the open containers kept as a
 * bit stack (1 = object), so nesting costs one bit per level and never
 * recurses. */
int sb_fields_parse(const char *line, size_t len, sb_fields *out)
{
    const unsigned char *p = (const unsigned char *)line;
    const unsigned char *const end = p + len;
    unsigned char stack[(SB_FIELDS_MAX_DEPTH + 7) / 8];
    size_t depth = 0;      /* containers open */
    sb_token *slot = NULL; /* the routing field whose value is being read */
    int top_object;
    int escaped;

    memset(out, 0, sizeof *out);
    SKIP_WS(p, end);
    if (p == end)
        goto fail;
    top_object = *p == '{';

value: /* p < end, at the first byte of a value */
    switch (*p) {
    case '{':
    case '[':
        if (depth == SB_FIELDS_MAX_DEPTH)
            goto fail;
        if (*p == '{')
            stack[depth >> 3] |= (unsigned char)(1u << (depth & 7));
        else
            stack[depth >> 3] &= (unsigned char)~(1u << (depth & 7));
        depth++;
        p++;
        SKIP_WS(p, end);
        if (p == end)
            goto fail;
        if (IN_OBJECT(stack, depth)) {
            if (*p == '}') {
                p++;
                depth--;
                goto value_end;
            }
            goto member;
        }
        if (*p == ']') {
            p++;
            depth--;
            goto value_end;
        }
        goto value;
    case '"':
        escaped = 0;
        p = scan_string(p + 1, end, &escaped);
        if (p == NULL)
            goto fail;
        goto value_end;
    case 't':
        if (end - p < 4 || memcmp(p, "true", 4) != 0)
            goto fail;
        p += 4;
        goto value_end;
    case 'f':
        if (end - p < 5 || memcmp(p, "false", 5) != 0)
            goto fail;
        p += 5;
        goto value_end;
    case 'n':
        if (end - p < 4 || memcmp(p, "null", 4) != 0)
            goto fail;
        p += 4;
        goto value_end;
    case '-': case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
        /* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
        if (*p == '-' && ++p == end)
            goto fail;
        if (*p == '0')
            p++;
        else if (IS_DIGIT(*p))
            while (++p < end && IS_DIGIT(*p))
                ;
        else
            goto fail;
        if (p < end && *p == '.') {
            if (++p == end || !IS_DIGIT(*p))
                goto fail;
            while (++p < end && IS_DIGIT(*p))
                ;
        }
        if (p < end && (*p == 'e' || *p == 'E')) {
            if (++p < end && (*p == '+' || *p == '-'))
                p++;
            if (p == end || !IS_DIGIT(*p))
                goto fail;
            while (++p < end && IS_DIGIT(*p))
                ;
        }
        goto value_end;
    default:
        goto fail;
    }

member: /* p < end, inside an object where a key must start */
    if (*p != '"')
        goto fail;
    {
        const unsigned char *key = p + 1;
        escaped = 0;
        p = scan_string(key, end, &escaped);
        if (p == NULL)
            goto fail;
        if (depth == 1) {
            sb_token *t = key_slot(out, key, (size_t)(p - 1 - key), escaped);
            /* A repeated key keeps its first value, as cJSON's lookup does. */
            if (t != NULL && t->type == SB_JSON_ABSENT)
                slot = t;
        }
    }
    SKIP_WS(p, end);
    if (p == end || *p != ':')
        goto fail;
    p++;
    SKIP_WS(p, end);
    if (p == end)
        goto fail;
    if (slot != NULL && depth == 1) {
        /* The field's value starts here (deeper members leave it alone). */
        slot->type = type_of(*p);
        slot->raw = (const char *)p;
    }
    goto value;

value_end: /* p just past a complete value */
    if (depth == 0) {
        SKIP_WS(p, end);
        if (p != end)
            goto fail;
        if (!top_object)
            return STDIO_BUS_EINVAL;
        return STDIO_BUS_OK;
    }
    if (slot != NULL && depth == 1) {
        /* Values nested inside the field's value end at depth >= 2. */
        slot->raw_len = (size_t)((const char *)p - slot->raw);
        slot = NULL;
    }
    SKIP_WS(p, end);
    if (p == end)
        goto fail;
    if (IN_OBJECT(stack, depth)) {
        if (*p == ',') {
            p++;
            SKIP_WS(p, end);
            if (p == end)
                goto fail;
            goto member;
        }
        if (*p != '}')
            goto fail;
    } else {
        if (*p == ',') {
            p++;
            SKIP_WS(p, end);
            if (p == end)
                goto fail;
            goto value;
        }
        if (*p != ']')
            goto fail;
    }
    p++;
    depth--;
    goto value_end;

fail:
    memset(out, 0, sizeof *out);
    return STDIO_BUS_ERR;
}
