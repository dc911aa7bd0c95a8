/* An output queue (spec 7.3.1): bytes waiting to be written to one fd.
 *
 * Owns its storage; grows geometrically and keeps it while the connection
 * is busy (no allocation per message); sb_outq_clear releases it, which the
 * daemon does for connections that went idle. Messages are always queued whole; the
 * cap (max_output_queue) is a threshold for backpressure, not a hard stop,
 * which is what lets a paused input finish the line it already read. */
#ifndef SB_OUTQ_H
#define SB_OUTQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *data;
    size_t head; /* first unwritten byte */
    size_t len;  /* bytes after head */
    size_t cap;
    size_t max;       /* max_output_queue */
    uint64_t drained; /* bytes written from it since init: how far its reader got (SB-X-17) */
} sb_outq;

void sb_outq_init(sb_outq *q, size_t max);
void sb_outq_fini(sb_outq *q);

/* Appends bytes[0..n). Returns 0, or STDIO_BUS_ERR when out of memory. */
int sb_outq_push(sb_outq *q, const char *bytes, size_t n);

/* Writes as much as the fd takes. Returns 0 when the queue is empty,
 * STDIO_BUS_EAGAIN when bytes remain (wait for POLLOUT), STDIO_BUS_EOF when
 * the reader is gone (EPIPE, ECONNRESET), STDIO_BUS_ERR on other errors. */
int sb_outq_flush(sb_outq *q, int fd);

/* Writes bytes[0..n) to fd, queuing whatever the fd does not take now
 * (eager write: a queue that is empty costs no copy). Same returns as
 * sb_outq_flush, with STDIO_BUS_ERR also for out of memory. */
int sb_outq_send(sb_outq *q, int fd, const char *bytes, size_t n);

static inline size_t sb_outq_len(const sb_outq *q) {
    return q->len;
}
static inline bool sb_outq_over(const sb_outq *q) {
    return q->len > q->max;
}

/* Drops every queued byte. */
void sb_outq_clear(sb_outq *q);

#endif
