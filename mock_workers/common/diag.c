/* Diagnostics on stderr (see diag.h). */
#include "common/diag.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static const char *program = "mock_common";
static int oom_status = 1;
static bool verbose;

void mc_diag_init(const char *name, int status) {
    program = name;
    oom_status = status;
}

void mc_diag_set_verbose(bool on) {
    verbose = on;
}

/* A fixed buffer, not mc_buf: this is also the out-of-memory path. */
static void vnote(const char *fmt, va_list ap) {
    char line[1024];
    int saved = errno;
    int n = snprintf(line, sizeof line, "%s[%ld]: ", program, (long)getpid());
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

void mc_diag_note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vnote(fmt, ap);
    va_end(ap);
}

void mc_diag_debug(const char *fmt, ...) {
    if (!verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    vnote(fmt, ap);
    va_end(ap);
}

void mc_diag_oom(void) {
    mc_diag_note("out of memory");
    /* _exit: no atexit handler may run now (LeakSanitizer's would turn the
     * documented exit status into its own). */
    _exit(oom_status);
}
