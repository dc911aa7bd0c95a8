#include "bench_buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_INBUF_MIN 65536

void bench_inbuf_init(bench_inbuf *b, size_t max) {
    memset(b, 0, sizeof *b);
    b->max = max;
}

void bench_inbuf_fini(bench_inbuf *b) {
    free(b->data);
    bench_inbuf_init(b, b->max);
}

char *bench_inbuf_space(bench_inbuf *b, size_t *avail) {
    if (b->start > 0) {
        b->len -= b->start;
        if (b->len)
            memmove(b->data, b->data + b->start, b->len);
        b->start = 0;
    }
    if (b->len == b->cap) {
        if (b->cap >= b->max) {
            *avail = 0;
            return NULL;
        }
        size_t cap = b->cap ? b->cap * 2 : BENCH_INBUF_MIN;
        if (cap > b->max)
            cap = b->max;
        char *grown = realloc(b->data, cap);
        if (!grown) {
            *avail = 0;
            return NULL;
        }
        b->data = grown;
        b->cap = cap;
    }
    *avail = b->cap - b->len;
    return b->data + b->len;
}

void bench_inbuf_commit(bench_inbuf *b, size_t n) {
    b->len += n;
}

size_t bench_inbuf_next(bench_inbuf *b, const char **line) {
    size_t pending = b->len - b->start;
    if (b->scanned >= pending)
        return 0;
    const char *nl = memchr(b->data + b->start + b->scanned, '\n', pending - b->scanned);
    if (!nl) {
        b->scanned = pending;
        return 0;
    }
    size_t n = (size_t)(nl - (b->data + b->start)) + 1;
    *line = b->data + b->start;
    b->start += n;
    b->scanned = 0;
    return n;
}

void bench_outq_fini(bench_outq *q) {
    free(q->data);
    memset(q, 0, sizeof *q);
}

int bench_outq_push(bench_outq *q, const char *bytes, size_t n) {
    if (q->head + q->len + n > q->cap) {
        /* Reclaim the written prefix only when it is at least as large as
         * what remains: each byte is then moved at most once on average.
         * (Moving the whole queue on every push is quadratic in its depth:
         * 64 KiB lines behind a 4 MiB queue cost 30 instructions a byte.) */
        if (q->head && q->head >= q->len) {
            memmove(q->data, q->data + q->head, q->len);
            q->head = 0;
        }
        if (q->head + q->len + n > q->cap) {
            size_t cap = q->cap ? q->cap : 65536;
            while (cap < q->head + q->len + n)
                cap *= 2;
            char *grown = realloc(q->data, cap);
            if (!grown)
                return -1;
            q->data = grown;
            q->cap = cap;
        }
    }
    memcpy(q->data + q->head + q->len, bytes, n);
    q->len += n;
    return 0;
}

/* Returns bytes written before EAGAIN or an error; *err is 0, EAGAIN or errno. */
static size_t write_some(int fd, const char *bytes, size_t n, int *err) {
    size_t done = 0;
    *err = 0;
    while (done < n) {
        ssize_t w = write(fd, bytes + done, n - done);
        if (w > 0) {
            done += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        *err = w < 0 ? errno : EIO;
        if (*err == EWOULDBLOCK)
            *err = EAGAIN;
        break;
    }
    return done;
}

int bench_outq_flush(bench_outq *q, int fd) {
    if (q->len == 0)
        return 0;
    int err;
    size_t w = write_some(fd, q->data + q->head, q->len, &err);
    q->head += w;
    q->len -= w;
    if (q->len == 0)
        q->head = 0;
    if (err && err != EAGAIN) {
        errno = err;
        return -1;
    }
    return q->len ? 1 : 0;
}

int bench_outq_send(bench_outq *q, int fd, const char *bytes, size_t n) {
    if (q->len) {
        if (bench_outq_push(q, bytes, n) < 0)
            return -1;
        return bench_outq_flush(q, fd);
    }
    int err;
    size_t w = write_some(fd, bytes, n, &err);
    if (err && err != EAGAIN) {
        errno = err;
        return -1;
    }
    if (w == n)
        return 0;
    return bench_outq_push(q, bytes + w, n - w) < 0 ? -1 : 1;
}
