/* Diagnostics on stderr (see ref_log.h). */
#include "ref_log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static bool verbose;

void ref_log_set_verbose(bool on)
{
    verbose = on;
}

/* A fixed buffer, not ref_buf: this is also the out-of-memory path. */
static void vnote(const char *fmt, va_list ap)
{
    char line[1024];
    int saved = errno;
    int n = snprintf(line, sizeof line, "ref_worker[%ld]: ", (long)getpid());
    if (n < 0)
        n = 0;
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2; /* truncated note */
    /* One note, one line: a decoded method name may hold a newline. */
    for (size_t i = (size_t)n; i < len; i++)
        if ((unsigned char)line[i] < 0x20)
            line[i] = '?';
    line[len++] = '\n';
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(STDERR_FILENO, line + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break; /* nowhere to complain to */
        off += (size_t)w;
    }
    errno = saved;
}

void ref_log_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vnote(fmt, ap);
    va_end(ap);
}

void ref_log_debug(const char *fmt, ...)
{
    if (!verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    vnote(fmt, ap);
    va_end(ap);
}
