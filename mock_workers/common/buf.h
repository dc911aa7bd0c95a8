/* Growable byte buffer, and allocation that cannot fail. A test worker has
 * no use for a degraded mode, so allocation failure (or a size that would
 * overflow) ends the process through mc_diag_oom instead of returning an
 * error every caller must pass up. */
#ifndef MC_BUF_H
#define MC_BUF_H

#include <stddef.h>

typedef struct mc_buf {
    char *data; /* owned; NUL-terminated after any append */
    size_t len;
    size_t cap;
} mc_buf;

void mc_buf_init(mc_buf *b);
void mc_buf_fini(mc_buf *b);
void mc_buf_append(mc_buf *b, const void *p, size_t n);
void mc_buf_puts(mc_buf *b, const char *s);
void mc_buf_printf(mc_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends n copies of c. */
void mc_buf_fill(mc_buf *b, char c, size_t n);
/* Drops the first n bytes (all of them when n >= len). */
void mc_buf_consume(mc_buf *b, size_t n);
/* Empties b, keeping its storage. */
void mc_buf_clear(mc_buf *b);
/* Hands the bytes to the caller (free() them; never NULL) and leaves b
 * empty. */
char *mc_buf_take(mc_buf *b, size_t *len);

/* malloc/calloc/realloc/strndup that end the process on failure. */
void *mc_xmalloc(size_t n);
void *mc_xcalloc(size_t n, size_t size);
void *mc_xrealloc(void *p, size_t n, size_t size);
char *mc_xstrndup(const char *s, size_t n);

#endif
