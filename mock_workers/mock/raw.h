/* Raw JSON tokens. The mock re-emits ids, sessionIds, methods and params
 * as the exact bytes it received, so an id like 9007199254740993 or 1.0
 * comes back unchanged and a daemon that compares raw tokens (spec 6.3.1)
 * can correlate it. cJSON would round such numbers through a double. */
#ifndef MW_RAW_H
#define MW_RAW_H

#include <stddef.h>

typedef struct mw_span {
    const char *p; /* borrowed from the caller's buffer */
    size_t n;
} mw_span;

/* Finds the value of top-level member `key` in the JSON object text
 * [s, s+n), which the caller has already validated (cJSON). The key is
 * compared as raw bytes between its quotes; the first match wins, as in
 * cJSON_GetObjectItemCaseSensitive. The span excludes surrounding
 * whitespace. Returns MC_OK, MC_ENOTFOUND, or MC_EINVAL if the text is not
 * an object. Pure: no allocation. */
int mw_raw_field(const char *s, size_t n, const char *key, mw_span *out);

/* Span of [s, s+n) without leading and trailing JSON whitespace. */
mw_span mw_raw_trim(const char *s, size_t n);

#endif
