#include "log.h"
#include "status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

sb_log_level sb_log_threshold = SB_LOG_INFO;

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

void sb_log_set_level(sb_log_level level) { sb_log_threshold = level; }

int sb_log_parse_level(const char *name, sb_log_level *out) {
    static const char *const lower[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, lower[i]) == 0) {
            *out = (sb_log_level)i;
            return STDIO_BUS_OK;
        }
    }
    return STDIO_BUS_EINVAL;
}

void sb_log(sb_log_level level, const char *ctx, const char *fmt, ...) {
    if (!sb_log_enabled(level))
        return;
    int saved_errno = errno;
    char line[2048];
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, now.tv_nsec / 1000000, level_names[level]);
    if (ctx && n < (int)sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, "[%s] ", ctx);
    if (n < (int)sizeof line) {
        va_list ap;
        va_start(ap, fmt);
        n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        va_end(ap);
    }
    if (n >= (int)sizeof line)
        n = (int)sizeof line - 1;
    line[n++] = '\n';
    /* stderr may be a pipe that is full or gone; a log line is never worth
     * blocking the loop or dying for, so one attempt and no retry loop. */
    ssize_t ignored = write(STDERR_FILENO, line, (size_t)n);
    (void)ignored;
    errno = saved_errno;
}
