#include "outq.h"
#include "status.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void sb_outq_init(sb_outq *q, size_t max) {
    memset(q, 0, sizeof *q);
    q->max = max;
}

void sb_outq_fini(sb_outq *q) {
    free(q->data);
    memset(q, 0, sizeof *q);
}

void sb_outq_clear(sb_outq *q) {
    size_t max = q->max;
    sb_outq_fini(q);
    q->max = max;
}

int sb_outq_push(sb_outq *q, const char *bytes, size_t n) {
    if (q->head + q->len + n > q->cap) {
        /* Reclaim the written prefix only when it is at least as large as
         * what must move: each byte then moves O(1) times (no quadratic
         * shuffling of a deep queue). */
        if (q->head && q->head >= q->len) {
            memmove(q->data, q->data + q->head, q->len);
            q->head = 0;
        }
        size_t need = q->head + q->len + n;
        if (need > q->cap) {
            size_t cap = q->cap ? q->cap : 4096;
            while (cap < need)
                cap *= 2;
            char *grown = realloc(q->data, cap);
            if (!grown)
                return STDIO_BUS_ERR;
            q->data = grown;
            q->cap = cap;
        }
    }
    memcpy(q->data + q->head + q->len, bytes, n);
    q->len += n;
    return STDIO_BUS_OK;
}

static int write_some(int fd, const char *bytes, size_t n, size_t *written) {
    *written = 0;
    while (*written < n) {
        ssize_t w = write(fd, bytes + *written, n - *written);
        if (w > 0) {
            *written += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return STDIO_BUS_EAGAIN;
        if (w < 0 && (errno == EPIPE || errno == ECONNRESET))
            return STDIO_BUS_EOF;
        return STDIO_BUS_ERR;
    }
    return STDIO_BUS_OK;
}

int sb_outq_flush(sb_outq *q, int fd) {
    if (q->len == 0)
        return STDIO_BUS_OK;
    size_t written;
    int rc = write_some(fd, q->data + q->head, q->len, &written);
    q->head += written;
    q->len -= written;
    q->drained += written;
    if (q->len == 0) {
        /* Keep the storage for the next message (no allocation per
         * message); the owner releases it when the connection goes idle. */
        q->head = 0;
        return rc == STDIO_BUS_EAGAIN ? STDIO_BUS_OK : rc;
    }
    return rc == STDIO_BUS_OK ? STDIO_BUS_EAGAIN : rc;
}

int sb_outq_send(sb_outq *q, int fd, const char *bytes, size_t n) {
    if (q->len) { /* keep order: behind what is queued */
        if (sb_outq_push(q, bytes, n) < 0)
            return STDIO_BUS_ERR;
        return sb_outq_flush(q, fd);
    }
    size_t written;
    int rc = write_some(fd, bytes, n, &written);
    if (rc == STDIO_BUS_OK)
        return STDIO_BUS_OK;
    if (rc != STDIO_BUS_EAGAIN)
        return rc;
    if (sb_outq_push(q, bytes + written, n - written) < 0)
        return STDIO_BUS_ERR;
    return STDIO_BUS_EAGAIN;
}
