/* Routing-field extraction (spec 2.2, 4.2.2).
 *
 * A pure, allocation-free scanner: it validates that one line is a JSON
 * text (RFC 8259) and reports where the top-level routing fields sit in the
 * caller's buffer. Every token points into `line` (a line of up to 1 KiB,
 * SB_FIELDS_PAD_MAX in fields.c, is scanned from a padded copy on the
 * stack, about 2.2 KB in all, but no token refers to the copy). */
#ifndef SB_FIELDS_H
#define SB_FIELDS_H

#include <stddef.h>

typedef enum {
    SB_JSON_ABSENT = 0, /* the key does not occur at top level */
    SB_JSON_STRING,
    SB_JSON_NUMBER,
    SB_JSON_TRUE,
    SB_JSON_FALSE,
    SB_JSON_NULL,
    SB_JSON_OBJECT,
    SB_JSON_ARRAY
} sb_json_type;

/* One top-level value: its type and its raw bytes in the line, exactly as
 * written (a string keeps its quotes and escapes, so "1" and 1 differ). */
typedef struct {
    sb_json_type type;
    unsigned char plain; /* a string without escapes, a number without fraction
                          * or exponent (may be 0 when such a token follows an
                          * escaped key): see sb_idkey_of for what it spares */
    const char *raw;
    size_t raw_len;
} sb_token;

typedef struct {
    sb_token id;
    sb_token session_id; /* key "sessionId" */
    sb_token method;
    sb_token result;
    sb_token error;
} sb_fields;

/* Scans line[0..len) (no terminating newline required; surrounding JSON
 * whitespace, including a trailing '\r', is allowed).
 * Returns STDIO_BUS_OK when the line is one valid JSON object and fills *out;
 *         STDIO_BUS_EINVAL when it is valid JSON but not an object (fields
 *         are all ABSENT);
 *         STDIO_BUS_ERR when it is not valid JSON (or nests deeper than
 *         SB_FIELDS_MAX_DEPTH).
 * When a key occurs twice at top level the first occurrence wins (as in
 * cJSON_GetObjectItemCaseSensitive). Keys are matched on their decoded
 * value, so "sessi\u006fnId" is "sessionId"; values stay raw.
 * Strictness follows RFC 8259 and, where the RFC leaves a choice, cJSON:
 * a lone UTF-16 surrogate escape ("\ud800") is invalid, UTF-8 is not
 * checked (see fields.c for the full list). */
int sb_fields_parse(const char *line, size_t len, sb_fields *out);

#define SB_FIELDS_MAX_DEPTH 1000

/* Lines up to this many bytes are scanned from a zero-padded stack copy
 * (see fields.c), which costs this much stack; -DSB_FIELDS_PAD_MAX=0 scans
 * every line in place. */
#ifndef SB_FIELDS_PAD_MAX
#define SB_FIELDS_PAD_MAX 1024
#endif

#endif
