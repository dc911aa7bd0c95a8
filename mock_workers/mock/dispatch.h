/* What the mock does with one line read from stdin: classify it (request,
 * notification, client response, garbage) and apply params.mock
 * directives. */
#ifndef MW_DISPATCH_H
#define MW_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct mw_worker mw_worker;

/* line is len bytes without the newline (borrowed). Blank lines are
 * ignored; anything else counts as a message for --after/--stall-after. */
void mw_dispatch_line(mw_worker *w, const char *line, size_t len, int64_t now);

#endif
