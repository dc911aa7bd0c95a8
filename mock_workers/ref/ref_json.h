/* Strict JSON text checks and raw tokens.
 *
 * cJSON is lenient: it takes `01`, `+1`, raw control characters inside
 * strings and bytes that are not UTF-8. A reference worker must never echo
 * such a token back, because its output must be JSON in UTF-8
 * (WORKER_SPEC.md SB-T-2, SB-R-11). So every line is first checked
 * against RFC 8259 here, and only then handed to cJSON.
 *
 * Ids, sessionIds and progress tokens are echoed as the exact bytes
 * received (SB-R-1): `1.0`, `9007199254740993` and `"\u0041"` come back
 * unchanged, where cJSON would round them through a double or decode them.
 * Those bytes are found here by position: the k-th member of an object in
 * cJSON's tree is the k-th member in the text, duplicates included.
 *
 * Pure: no allocation, no I/O. Spans point into the caller's text. */
#ifndef REF_JSON_H
#define REF_JSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

typedef struct ref_span {
    const char *p; /* borrowed; NULL: absent */
    size_t n;
} ref_span;

/* Reasons a line is not acceptable JSON text. */
#define REF_JSON_ESYNTAX -1 /* not RFC 8259 JSON */
#define REF_JSON_EUTF8   -2 /* a string holds bytes that are not UTF-8 */
#define REF_JSON_EDEPTH  -3 /* nested deeper than REF_JSON_MAX_DEPTH */

#define REF_JSON_MAX_DEPTH 256

/* Checks that [p, p+n) is exactly one JSON value with optional whitespace
 * around it. Returns MC_OK or one of the REF_JSON_E* codes. */
int ref_json_check(const char *p, size_t n);

/* A short English description of a REF_JSON_E* code. */
const char *ref_json_strerror(int code);

/* The value span of the index-th member (0-based) of the object text, or
 * the index-th element of the array text, `text` having passed
 * ref_json_check. Returns MC_OK or MC_ENOTFOUND. */
int ref_json_member(ref_span text, size_t index, ref_span *value);
int ref_json_element(ref_span text, size_t index, ref_span *value);

/* The first member named key of obj (cJSON_GetObjectItemCaseSensitive's
 * choice) and its raw span inside raw, obj's own text. Returns the item or
 * NULL; *value is {NULL, 0} when the member is absent. */
const cJSON *ref_json_get(const cJSON *obj, ref_span raw, const char *key, ref_span *value);

#endif
