/* Growable byte buffer (see buf.h). */
#include "common/buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/diag.h"

void *mc_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p)
        mc_diag_oom();
    return p;
}

void *mc_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        mc_diag_oom();
    return p;
}

void *mc_xrealloc(void *p, size_t n, size_t size) {
    if (size && n > SIZE_MAX / size)
        mc_diag_oom();
    size_t bytes = n * size;
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q)
        mc_diag_oom();
    return q;
}

char *mc_xstrndup(const char *s, size_t n) {
    if (n == SIZE_MAX)
        mc_diag_oom();
    char *p = mc_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void mc_buf_init(mc_buf *b) {
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void mc_buf_fini(mc_buf *b) {
    free(b->data);
    mc_buf_init(b);
}

/* Room for n more bytes plus the terminating NUL; a size that would
 * overflow is treated as out of memory. */
static void reserve(mc_buf *b, size_t n) {
    if (n >= SIZE_MAX - b->len)
        mc_diag_oom();
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = realloc(b->data, cap);
    if (!p)
        mc_diag_oom();
    b->data = p;
    b->cap = cap;
}

void mc_buf_append(mc_buf *b, const void *p, size_t n) {
    reserve(b, n);
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void mc_buf_puts(mc_buf *b, const char *s) {
    mc_buf_append(b, s, strlen(s));
}

void mc_buf_printf(mc_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void mc_buf_fill(mc_buf *b, char c, size_t n) {
    reserve(b, n);
    memset(b->data + b->len, c, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void mc_buf_consume(mc_buf *b, size_t n) {
    if (n >= b->len) {
        mc_buf_clear(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

void mc_buf_clear(mc_buf *b) {
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

char *mc_buf_take(mc_buf *b, size_t *len) {
    if (!b->data) {
        reserve(b, 0);
        b->data[0] = '\0';
    }
    char *p = b->data;
    if (len)
        *len = b->len;
    mc_buf_init(b);
    return p;
}
