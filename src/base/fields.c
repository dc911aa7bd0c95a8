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
 *     truncate "id\u0000x" to "id"; we compare the full decoded key).
 *
 * Speed: a line of at most SB_FIELDS_PAD_MAX bytes (nearly every message)
 * is copied to the stack and followed by PAD_BYTES zero bytes. A NUL byte
 * is invalid everywhere in JSON (outside a string it is not whitespace,
 * inside one it is a raw control character), so the scanner may run into
 * the padding without comparing against the end: it stops there as at any
 * other invalid byte and fails. Only the success test ("nothing but
 * whitespace after the value") asks whether the stop was the end itself
 * or a NUL of the line's own, so an embedded NUL is still an error. Every
 * read stays inside the copy: the scanner only moves past bytes it has
 * checked to be non-NUL, so it never gets beyond the first padding byte,
 * and no read reaches further ahead than the padding (the 64-byte string
 * blocks are the widest). Longer lines are scanned in place by the same
 * code with its bounds checks compiled in (parse_core's `padded`).
 * Tokens always point into the caller's line, never into the copy. */
#include "fields.h"

#include <stdint.h>
#include <string.h>

#include "status.h"
#include "fields_scan.h"

/* Zero bytes after the copy: at least the widest read ahead (64). */
#define PAD_BYTES 64

#define IS_WS(c)    ((c) == ' ' || (c) == '\n' || (c) == '\r' || (c) == '\t')
#define IS_DIGIT(c) ((unsigned)((c) - '0') < 10u)

/* Skips whitespace. Most tokens follow their predecessor directly, so one
 * test (any byte above ' ' is not whitespace) usually settles it. */
#define SKIP_WS(p)                                                                                 \
    do {                                                                                           \
        if (!AT_END(p) && *(p) <= ' ')                                                             \
            while (!AT_END(p) && IS_WS(*(p)))                                                      \
                (p)++;                                                                             \
    } while (0)

/* Whether the escaped key k[0..n) (already validated) decodes to lit. The
 * routing keys are ASCII, so an escape that decodes to anything else
 * cannot match and the decoder never needs to produce UTF-8. */
static int key_equals(const unsigned char *k, size_t n, const char *lit) {
    const unsigned char *end = k + n;

    while (k < end) {
        unsigned c = *k++;
        if (c == '\\') {
            c = *k++;
            switch (c) {
            case 'b':
                c = '\b';
                break;
            case 'f':
                c = '\f';
                break;
            case 'n':
                c = '\n';
                break;
            case 'r':
                c = '\r';
                break;
            case 't':
                c = '\t';
                break;
            case 'u':
                c = (unsigned)hex4(k, end);
                k += 4;
                if (c >= 0x80)
                    return 0;
                break;
            default:
                break; /* '"', '\\' and '/' stand for themselves */
            }
        }
        if (*lit == '\0' || (unsigned char)*lit != c)
            return 0;
        lit++;
    }
    return *lit == '\0';
}

/* Unaligned loads for comparing short keys (memcpy compiles to one mov). */
static inline uint32_t load32(const void *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t load64(const void *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The routing field an escaped top-level key names, or NULL (rare). */
static sb_token *escaped_key_slot(sb_fields *out, const unsigned char *k, size_t n) {
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

/* The routing field a top-level key names, or NULL. */
static ALWAYS_INLINE sb_token *key_slot(sb_fields *out, const unsigned char *k, size_t n,
                                        int escaped) {
    if (escaped)
        return escaped_key_slot(out, k, n);
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
static ALWAYS_INLINE sb_json_type type_of(unsigned char c) {
    switch (c) {
    case '{':
        return SB_JSON_OBJECT;
    case '[':
        return SB_JSON_ARRAY;
    case '"':
        return SB_JSON_STRING;
    case 't':
        return SB_JSON_TRUE;
    case 'f':
        return SB_JSON_FALSE;
    case 'n':
        return SB_JSON_NULL;
    default:
        return SB_JSON_NUMBER;
    }
}

/* The parser over base[0..len), which is `line` itself or its padded copy
 * (`padded`); tokens are reported at the same offsets in `line`. It is a
 * loop over three states (a value is expected, a member key is expected, a
 * value just ended). The open containers are kept as a stack of their
 * closing brackets, one byte per level ('}' or ']', which are '{' and '['
 * plus 2), so a close is one compare and never recurses; level 0 holds 0,
 * which on a padded copy is also the byte at the end. Whitespace is rare
 * between tokens, so each state first tests for the byte it expects and
 * skips whitespace only when that fails.
 * *out is all ABSENT on entry. */
static ALWAYS_INLINE int parse_core(const unsigned char *base, size_t len, const char *line,
                                    int padded, sb_fields *out) {
    const unsigned char *p = base;
    const unsigned char *const end = base + len;
    unsigned char closers[SB_FIELDS_MAX_DEPTH + 1];
    size_t depth = 0;      /* containers open */
    unsigned closer = 0;   /* closers[depth] */
    sb_token *slot = NULL; /* the routing field whose value is being read */
    const scan_consts consts = make_scan_consts();
    int escaped = 0;
    int odd_number = 0; /* the field's number has a fraction or an exponent */

    closers[0] = 0;
    /* Nearly every line starts with these 17 bytes (spec 2.2: "jsonrpc"
     * is "2.0"): an object opened, a member that is no routing field and
     * a comma, which the states below would reach one byte at a time;
     * requests and responses then go on with the key "id" (not seen yet,
     * so its slot is free). Equal bytes, the same state; anything else
     * takes the general path. */
    if ((padded || len >= 17) && load64(p) == load64("{\"jsonrp") &&
        load64(p + 8) == load64("c\":\"2.0\"") && p[16] == ',') {
        closer = '}';
        closers[++depth] = '}';
        p += 17;
        if ((padded || end - p >= 5) && load32(p) == load32("\"id\"") && p[4] == ':') {
            p += 5;
            slot = &out->id;
            goto member_value;
        }
        goto member;
    }
    SKIP_WS(p);
    if (AT_END(p))
        return STDIO_BUS_ERR;

value: /* a value is expected at p, maybe after whitespace */
    if (AT_END(p))
        return STDIO_BUS_ERR;
    if (*p == '"') { /* the most common value by far */
        escaped = 0;
        p = scan_string(p + 1, end, padded, &consts, &escaped);
        if (p == NULL)
            return STDIO_BUS_ERR;
        goto value_end;
    }
    if (*p == '{' || *p == '[') {
        if (depth == SB_FIELDS_MAX_DEPTH)
            return STDIO_BUS_ERR;
        closer = *p + 2u;
        closers[++depth] = (unsigned char)closer;
        p++;
        SKIP_WS(p);
        if (AT_END(p))
            return STDIO_BUS_ERR;
        if (*p == closer) { /* empty */
            p++;
            goto close;
        }
        if (closer == '}')
            goto member;
        goto value;
    }
    switch (*p) {
    case 't':
        if ((!padded && end - p < 4) || memcmp(p, "true", 4) != 0)
            return STDIO_BUS_ERR;
        p += 4;
        goto value_end;
    case 'f':
        if ((!padded && end - p < 5) || memcmp(p, "false", 5) != 0)
            return STDIO_BUS_ERR;
        p += 5;
        goto value_end;
    case 'n':
        if ((!padded && end - p < 4) || memcmp(p, "null", 4) != 0)
            return STDIO_BUS_ERR;
        p += 4;
        goto value_end;
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
        /* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
        if (*p == '-' && (++p, AT_END(p)))
            return STDIO_BUS_ERR;
        if (*p == '0')
            p++;
        else if (IS_DIGIT(*p))
            while (++p, !AT_END(p) && IS_DIGIT(*p))
                ;
        else
            return STDIO_BUS_ERR;
        if (!AT_END(p) && *p == '.') {
            odd_number = 1;
            if (++p, AT_END(p) || !IS_DIGIT(*p))
                return STDIO_BUS_ERR;
            while (++p, !AT_END(p) && IS_DIGIT(*p))
                ;
        }
        if (!AT_END(p) && (*p == 'e' || *p == 'E')) {
            odd_number = 1;
            if (++p, !AT_END(p) && (*p == '+' || *p == '-'))
                p++;
            if (AT_END(p) || !IS_DIGIT(*p))
                return STDIO_BUS_ERR;
            while (++p, !AT_END(p) && IS_DIGIT(*p))
                ;
        }
        goto value_end;
    case ' ':
    case '\t':
    case '\n':
    case '\r':
        SKIP_WS(p); /* then a non-blank byte, or the end */
        goto value;
    default:
        return STDIO_BUS_ERR;
    }

member: /* a key is expected at p, maybe after whitespace */
    if (AT_END(p))
        return STDIO_BUS_ERR;
    if (*p != '"') {
        if (!IS_WS(*p))
            return STDIO_BUS_ERR;
        SKIP_WS(p);
        goto member;
    }
    {
        const unsigned char *key = p + 1;
        size_t key_len;
        sb_token *t;
        escaped = 0;
        p = scan_string(key, end, padded, &consts, &escaped);
        if (p == NULL)
            return STDIO_BUS_ERR;
        key_len = (size_t)(p - 1 - key);
        if (AT_END(p) || *p != ':') {
            SKIP_WS(p);
            if (AT_END(p) || *p != ':')
                return STDIO_BUS_ERR;
        }
        p++;
        if (depth != 1)
            goto value;
        t = key_slot(out, key, key_len, escaped);
        /* A repeated key keeps its first value, as cJSON's lookup does. */
        if (t == NULL || t->type != SB_JSON_ABSENT)
            goto value;
        slot = t;
    }
member_value: /* p just past the ':' of a routing field's key at depth 1 */
    SKIP_WS(p);
    if (AT_END(p))
        return STDIO_BUS_ERR;
    /* The field's value starts here (deeper members leave it alone); raw
     * points into base until the value ends. */
    slot->type = type_of(*p);
    slot->raw = (const char *)p;
    goto value;

close: /* p just past the bracket that closed the innermost container */
    closer = closers[--depth];
    /* fall through */

value_end: /* p just past a complete value */
    if (slot != NULL && depth == 1) {
        /* Values nested inside the field's value end at depth >= 2. */
        const unsigned char *start = (const unsigned char *)slot->raw;
        slot->raw = line + (start - base);
        slot->raw_len = (size_t)(p - start);
        /* A string's own escapes, a number's fraction or exponent. An
         * escaped key, or a number with a fraction earlier in the line,
         * only makes this conservative (0: the id is looked at again). */
        slot->plain = !(escaped | odd_number);
        odd_number = 0;
        slot = NULL;
    }
after_value: /* a ',', a closing bracket or the end is expected at p */
    if (AT_END(p))
        goto finish;
    if (*p == ',') {
        p++;
        if (closer == '}')
            goto member;
        if (closer == 0) /* a comma after the top-level value */
            return STDIO_BUS_ERR;
        goto value;
    }
    if (*p == closer) {
        if (depth == 0) /* the top-level value ended at a NUL */
            goto finish;
        p++;
        goto close;
    }
    if (!IS_WS(*p))
        return STDIO_BUS_ERR;
    SKIP_WS(p);
    goto after_value;

finish:                         /* the top-level value ended (or the input did) */
    if (depth != 0 || p != end) /* p != end: a NUL of the line's own */
        return STDIO_BUS_ERR;
    for (p = base; IS_WS(*p); p++) /* to the first byte of the value */
        ;
    return *p == '{' ? STDIO_BUS_OK : STDIO_BUS_EINVAL;
}

#if SB_FIELDS_PAD_MAX > 0
/* Scans lines of up to SB_FIELDS_PAD_MAX bytes from a padded copy. Kept
 * out of line (as is parse_in_place) so that each has its own frame and
 * register allocation: about 2.1 KB of stack for this one, 1 KB for the
 * other. */
static NOINLINE int parse_padded(const char *line, size_t len, sb_fields *out) {
    unsigned char copy[SB_FIELDS_PAD_MAX + PAD_BYTES];

    memcpy(copy, line, len);
    memset(copy + len, 0, PAD_BYTES);
    return parse_core(copy, len, line, 1, out);
}
#endif

static NOINLINE int parse_in_place(const char *line, size_t len, sb_fields *out) {
    return parse_core((const unsigned char *)line, len, line, 0, out);
}

int sb_fields_parse(const char *line, size_t len, sb_fields *out) {
    int rc;

    memset(out, 0, sizeof *out);
    if (len == 0) /* not JSON; and line may be NULL, which memcpy rejects */
        return STDIO_BUS_ERR;
#if SB_FIELDS_PAD_MAX > 0
    if (len <= SB_FIELDS_PAD_MAX)
        rc = parse_padded(line, len, out);
    else
#endif
        rc = parse_in_place(line, len, out);
    if (rc == STDIO_BUS_ERR)
        memset(out, 0, sizeof *out);
    return rc;
}
