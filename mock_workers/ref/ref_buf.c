/* Growable byte buffer (see ref_buf.h). */
#include "ref_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/diag.h"
#include "ref_status.h"

static void out_of_memory(void)
{
    mc_diag_oom();
}

void ref_buf_init(ref_buf *b)
{
    b->p = NULL;
    b->len = 0;
    b->cap = 0;
}

void ref_buf_fini(ref_buf *b)
{
    free(b->p);
    ref_buf_init(b);
}

/* Room for n more bytes plus the terminating NUL. */
static void reserve(ref_buf *b, size_t n)
{
    if (n >= (size_t)-1 - b->len)
        out_of_memory();
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > (size_t)-1 / 2 ? need : cap * 2;
    char *p = realloc(b->p, cap);
    if (!p)
        out_of_memory();
    b->p = p;
    b->cap = cap;
}

void ref_buf_add(ref_buf *b, const void *p, size_t n)
{
    reserve(b, n);
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void ref_buf_adds(ref_buf *b, const char *s)
{
    ref_buf_add(b, s, strlen(s));
}

void ref_buf_addf(ref_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void ref_buf_drop(ref_buf *b, size_t n)
{
    if (n >= b->len) {
        ref_buf_clear(b);
        return;
    }
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
    b->p[b->len] = '\0';
}

void ref_buf_clear(ref_buf *b)
{
    b->len = 0;
    if (b->p)
        b->p[0] = '\0';
}

void *ref_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        out_of_memory();
    return p;
}

char *ref_xstrndup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p)
        out_of_memory();
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}
