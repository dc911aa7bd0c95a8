/* Event log, pid file and diagnostics (see log.h). */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "status.h"

int mw_log_open(mw_log *l, const char *path, const char *worker)
{
    l->fd = -1;
    l->worker = worker ? worker : "-";
    if (!path)
        return MW_OK;
    l->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    return l->fd < 0 ? MW_ERR : MW_OK;
}

void mw_log_close(mw_log *l)
{
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
}

/* One write(2) per record: O_APPEND makes that write land whole at the end
 * of the file even when other workers append at the same time. */
static void write_once(int fd, const char *p, size_t n)
{
    ssize_t r;
    do {
        r = write(fd, p, n);
    } while (r < 0 && errno == EINTR);
}

void mw_log_record(const mw_log *l, const char *dir, const char *data, size_t len)
{
    if (l->fd < 0)
        return;
    mw_buf b;
    mw_buf_init(&b);
    mw_buf_printf(&b, "%lld %ld %s %s ", (long long)mw_clock_now(), (long)getpid(), l->worker,
                  dir);
    mw_buf_append(&b, data, len);
    mw_buf_append(&b, "\n", 1);
    write_once(l->fd, b.data, b.len);
    mw_buf_fini(&b);
}

int mw_log_pidfile(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return MW_ERR;
    char line[32];
    int n = snprintf(line, sizeof line, "%ld\n", (long)getpid());
    write_once(fd, line, (size_t)n);
    close(fd);
    return MW_OK;
}

void mw_log_diag(const char *fmt, ...)
{
    mw_buf b;
    mw_buf_init(&b);
    mw_buf_printf(&b, "mock_worker[%ld]: ", (long)getpid());
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        char *msg = mw_xmalloc((size_t)n + 1);
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        va_end(ap);
        mw_buf_append(&b, msg, (size_t)n);
        free(msg);
    }
    mw_buf_append(&b, "\n", 1);
    write_once(STDERR_FILENO, b.data, b.len);
    mw_buf_fini(&b);
}
