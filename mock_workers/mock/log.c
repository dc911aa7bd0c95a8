/* Event log and pid file (see log.h). */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/status.h"

int mw_log_open(mw_log *l, const char *path, const char *worker) {
    l->fd = -1;
    l->worker = worker ? worker : "-";
    if (!path)
        return MC_OK;
    l->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    return l->fd < 0 ? MC_ERR : MC_OK;
}

void mw_log_close(mw_log *l) {
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
}

/* One write(2) per record: O_APPEND makes that write land whole at the end
 * of the file even when other workers append at the same time. */
static void write_once(int fd, const char *p, size_t n) {
    ssize_t r;
    do {
        r = write(fd, p, n);
    } while (r < 0 && errno == EINTR);
}

void mw_log_record(const mw_log *l, const char *dir, const char *data, size_t len) {
    if (l->fd < 0)
        return;
    mc_buf b;
    mc_buf_init(&b);
    mc_buf_printf(&b, "%lld %ld %s %s ", (long long)mc_clock_now(), (long)getpid(), l->worker, dir);
    mc_buf_append(&b, data, len);
    mc_buf_append(&b, "\n", 1);
    write_once(l->fd, b.data, b.len);
    mc_buf_fini(&b);
}

int mw_log_pidfile(const char *path) {
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return MC_ERR;
    char line[32];
    int n = snprintf(line, sizeof line, "%ld\n", (long)getpid());
    write_once(fd, line, (size_t)n);
    close(fd);
    return MC_OK;
}
