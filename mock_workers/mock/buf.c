/* Growable byte buffer (see buf.h). */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/diag.h"

static void die_oom(void)
{
    mc_diag_oom();
}

void *mw_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        die_oom();
    return p;
}

char *mw_xstrndup(const char *s, size_t n)
{
    char *p = mw_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void mw_buf_init(mw_buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void mw_buf_fini(mw_buf *b)
{
    free(b->data);
    mw_buf_init(b);
}

/* Keeps one spare byte so data stays NUL-terminated for string use. */
static void reserve(mw_buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p)
        die_oom();
    b->data = p;
    b->cap = cap;
}

void mw_buf_append(mw_buf *b, const void *p, size_t n)
{
    reserve(b, n);
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void mw_buf_puts(mw_buf *b, const char *s)
{
    mw_buf_append(b, s, strlen(s));
}

void mw_buf_printf(mw_buf *b, const char *fmt, ...)
{
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

void mw_buf_fill(mw_buf *b, char c, size_t n)
{
    reserve(b, n);
    memset(b->data + b->len, c, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void mw_buf_consume(mw_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
    }
    if (b->data)
        b->data[b->len] = '\0';
}

char *mw_buf_take(mw_buf *b, size_t *len)
{
    if (!b->data)
        reserve(b, 0);
    char *p = b->data;
    if (len)
        *len = b->len;
    mw_buf_init(b);
    return p;
}
