/* The event log (--log) and the pid file (--pidfile). Notes on stderr are
 * common/diag.h.
 *
 * Log record: `<CLOCK_MONOTONIC ns> <pid> <worker id or -> <dir> <data>\n`,
 * written with ONE write(2) on a file opened O_APPEND, so several worker
 * processes can share one file without their records interleaving. */
#ifndef MW_LOG_H
#define MW_LOG_H

#include <stddef.h>

typedef struct mw_log {
    int fd;             /* -1 when no --log was given */
    const char *worker; /* borrowed: STDIO_BUS_WORKER_ID or "-" */
} mw_log;

/* Opens path for appending (path may be NULL: logging off). worker may be
 * NULL. Returns MC_OK or MC_ERR (errno set). */
int mw_log_open(mw_log *l, const char *path, const char *worker);
void mw_log_close(mw_log *l);
/* Appends one record; data is len raw bytes (no newline of its own). */
void mw_log_record(const mw_log *l, const char *dir, const char *data, size_t len);
/* Appends `<pid>\n` to path with one write. Returns MC_OK or MC_ERR. */
int mw_log_pidfile(const char *path);

#endif
