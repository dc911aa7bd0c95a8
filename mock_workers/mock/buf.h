/* Growable byte buffer. A test helper has no use for a degraded mode, so
 * allocation failure ends the process (exit 3) instead of returning. */
#ifndef MW_BUF_H
#define MW_BUF_H

#include <stddef.h>

typedef struct mw_buf {
    char *data; /* owned; NUL-terminated whenever len > 0 or after any append */
    size_t len;
    size_t cap;
} mw_buf;

void mw_buf_init(mw_buf *b);
void mw_buf_fini(mw_buf *b);
void mw_buf_append(mw_buf *b, const void *p, size_t n);
void mw_buf_puts(mw_buf *b, const char *s);
void mw_buf_printf(mw_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends n copies of c. */
void mw_buf_fill(mw_buf *b, char c, size_t n);
/* Drops the first n bytes. */
void mw_buf_consume(mw_buf *b, size_t n);
/* Hands the bytes to the caller (free() them) and leaves b empty. */
char *mw_buf_take(mw_buf *b, size_t *len);

/* malloc/strdup that end the process on failure, for the same reason. */
void *mw_xmalloc(size_t n);
char *mw_xstrndup(const char *s, size_t n);

#endif
