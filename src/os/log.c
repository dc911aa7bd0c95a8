#include "log.h"
#include "status.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

sb_log_level sb_log_threshold = SB_LOG_INFO;

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

/* stderr may be a pipe nobody reads (issue 14): a write(2) there would
 * block the loop and freeze every client, and a log line is never worth
 * that. fd 2 is left blocking, because its open file description is shared
 * with whoever started us (O_NONBLOCK would change their writes too).
 * Instead each line is written only when poll() says it fits: on a pipe a
 * line (<= PIPE_BUF, 4096 on Linux, and a writable pipe has a free page)
 * then goes whole; a socket is sent to with MSG_DONTWAIT.
 * What does not fit is dropped and counted, and the count is written once
 * stderr takes lines again. A line written only in part (a socket can
 * take part of one) is finished before anything else. A regular file
 * always takes lines; a terminal says it is writable with little room
 * left, so one stopped with Ctrl-S may still block a line: accepted. */
#define SB_LOG_LINE_MAX 4096 /* carries a worker stderr piece (SB-I-7) whole */

static long dropped;               /* lines lost since stderr last took one */
static char tail[SB_LOG_LINE_MAX]; /* the unwritten end of a line cut short */
static size_t tail_len;
static int stderr_kind = -1; /* -1 unknown, 0 not a socket, 1 socket */
int sb_log_owing;            /* dropped || tail_len */
unsigned sb_log_clears;

void sb_log_set_level(sb_log_level level) {
    sb_log_threshold = level;
}

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

#define LOG_FULL   (-1) /* stderr takes nothing now */
#define LOG_BROKEN (-2) /* stderr failed: closed, gone, out of space */

/* Writes what stderr takes now without blocking. Returns the bytes
 * written, LOG_FULL or LOG_BROKEN. */
static ssize_t write_some(const char *buf, size_t len) {
    if (stderr_kind < 0) {
        struct stat st;
        stderr_kind = fstat(STDERR_FILENO, &st) == 0 && S_ISSOCK(st.st_mode);
    }
    ssize_t n;
    if (stderr_kind) {
        do
            n = send(STDERR_FILENO, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? LOG_FULL : LOG_BROKEN;
        return n > 0 ? n : LOG_FULL;
    }
    struct pollfd pfd = {STDERR_FILENO, POLLOUT, 0};
    int ready;
    do
        ready = poll(&pfd, 1, 0);
    while (ready < 0 && errno == EINTR);
    if (ready == 1 && (pfd.revents & (POLLERR | POLLNVAL)))
        return LOG_BROKEN;
    if (ready != 1 || !(pfd.revents & POLLOUT))
        return LOG_FULL;
    do
        n = write(STDERR_FILENO, buf, len);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? LOG_FULL : LOG_BROKEN;
    return n > 0 ? n : LOG_FULL;
}

/* Writes line whole, or keeps what did not fit in tail. Returns 0, or
 * LOG_FULL / LOG_BROKEN when none of it was written. */
static int write_line(const char *line, size_t len) {
    ssize_t n = write_some(line, len);
    if (n < 0)
        return (int)n;
    if ((size_t)n < len) {
        tail_len = len - (size_t)n;
        memcpy(tail, line + n, tail_len);
        sb_log_owing = 1;
    }
    return 0;
}

/* Finishes a cut line, then says how many were dropped. Returns 1 when
 * stderr is clear for a new line, 0 when it is still behind, LOG_BROKEN. */
static int catch_up(void) {
    if (tail_len) {
        ssize_t n = write_some(tail, tail_len);
        if (n < 0)
            return n == LOG_FULL ? 0 : LOG_BROKEN;
        memmove(tail, tail + n, tail_len - (size_t)n);
        tail_len -= (size_t)n;
        if (tail_len)
            return 0;
    }
    if (dropped) {
        char note[128];
        int n =
            snprintf(note, sizeof note,
                     "stdio_bus: %ld log line(s) dropped: stderr was not taking them\n", dropped);
        int rc = write_line(note, (size_t)n);
        if (rc < 0)
            return rc == LOG_FULL ? 0 : LOG_BROKEN;
        dropped = 0;
        if (tail_len)
            return 0;
    }
    if (sb_log_owing) {
        sb_log_owing = 0;
        sb_log_clears++;
    }
    return 1;
}

int sb_log_flush(void) {
    if (!sb_log_backlog())
        return 1;
    int saved_errno = errno;
    int rc = catch_up();
    errno = saved_errno;
    return rc < 0 ? STDIO_BUS_ERR : rc;
}

void sb_log(sb_log_level level, const char *ctx, const char *fmt, ...) {
    if (!sb_log_enabled(level))
        return;
    int saved_errno = errno;
    char line[SB_LOG_LINE_MAX];
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     now.tv_nsec / 1000000, level_names[level]);
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
    if (!(sb_log_backlog() && catch_up() != 1) && write_line(line, (size_t)n) == 0) {
        errno = saved_errno;
        return;
    }
    dropped++;
    sb_log_owing = 1;
    errno = saved_errno;
}
