/* Line input buffers and output queues for bench_relay and bench_load.
 *
 * Same shape as the daemon's sb_frame / sb_outq, written independently so
 * the measuring tools share no code with what they measure. Storage is
 * kept across messages (allocation only when a buffer grows). */
#ifndef BENCH_BUF_H
#define BENCH_BUF_H

#include <stddef.h>

typedef struct {
    char *data;
    size_t start;   /* first byte not yet returned as a line */
    size_t scanned; /* data[start .. start+scanned) holds no '\n' */
    size_t len;
    size_t cap;
    size_t max; /* a line (with its '\n') may take at most max bytes */
} bench_inbuf;

void bench_inbuf_init(bench_inbuf *b, size_t max);
void bench_inbuf_fini(bench_inbuf *b);
/* Room for the next read: compacts, grows geometrically up to max. Returns
 * NULL when out of memory, or when max bytes are buffered without a
 * complete line (the line is too long). */
char *bench_inbuf_space(bench_inbuf *b, size_t *avail);
void bench_inbuf_commit(bench_inbuf *b, size_t n);
/* The next complete line, newline included: returns its length, 0 when no
 * complete line is buffered. *line points into the buffer until the next
 * bench_inbuf_space. */
size_t bench_inbuf_next(bench_inbuf *b, const char **line);
static inline size_t bench_inbuf_pending(const bench_inbuf *b) {
    return b->len - b->start;
}

typedef struct {
    char *data;
    size_t head;
    size_t len;
    size_t cap;
} bench_outq;

void bench_outq_fini(bench_outq *q);
/* Appends bytes. Returns 0, or -1 when out of memory. */
int bench_outq_push(bench_outq *q, const char *bytes, size_t n);
/* Writes what the fd takes. Returns 0 when the queue is empty, 1 when
 * bytes remain (wait for POLLOUT), -1 on error (errno set). */
int bench_outq_flush(bench_outq *q, int fd);
/* Writes bytes now if nothing is queued, queuing what the fd does not take.
 * Same returns as bench_outq_flush. */
int bench_outq_send(bench_outq *q, int fd, const char *bytes, size_t n);
static inline size_t bench_outq_len(const bench_outq *q) {
    return q->len;
}

#endif
