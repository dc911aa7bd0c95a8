/* Growable byte buffer. A reference worker has no use for a degraded mode,
 * so allocation failure ends the process (REF_EXIT_IO, after a note on
 * stderr) instead of returning an error every caller must pass up. */
#ifndef REF_BUF_H
#define REF_BUF_H

#include <stddef.h>

typedef struct ref_buf {
    char *p;    /* owned; NUL-terminated after any append */
    size_t len;
    size_t cap;
} ref_buf;

void ref_buf_init(ref_buf *b);
void ref_buf_fini(ref_buf *b);
void ref_buf_add(ref_buf *b, const void *p, size_t n);
void ref_buf_adds(ref_buf *b, const char *s);
void ref_buf_addf(ref_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drops the first n bytes (n <= len). */
void ref_buf_drop(ref_buf *b, size_t n);
/* Empties b, keeping its storage. */
void ref_buf_clear(ref_buf *b);

/* malloc/calloc/strndup that end the process on failure, for the same
 * reason. */
void *ref_xcalloc(size_t n, size_t size);
char *ref_xstrndup(const char *s, size_t n);

#endif
