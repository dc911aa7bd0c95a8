/* stdin cut into lines (see lines.h). */
#include "common/lines.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/status.h"

#define READ_CHUNK 65536

void mc_lines_init(mc_lines *l) {
    mc_buf_init(&l->buf);
    l->start = 0;
    l->scanned = 0;
}

void mc_lines_fini(mc_lines *l) {
    mc_buf_fini(&l->buf);
    mc_lines_init(l);
}

ssize_t mc_lines_read(mc_lines *l, int fd) {
    mc_buf_consume(&l->buf, l->start);
    l->scanned -= l->start;
    l->start = 0;
    char chunk[READ_CHUNK];
    ssize_t r;
    do {
        r = read(fd, chunk, sizeof chunk);
    } while (r < 0 && errno == EINTR);
    if (r < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : MC_ERR;
    if (r == 0)
        return MC_EOF;
    mc_buf_append(&l->buf, chunk, (size_t)r);
    return r;
}

bool mc_lines_next(mc_lines *l, const char **line, size_t *len) {
    size_t from = l->scanned > l->start ? l->scanned : l->start;
    const char *nl = from < l->buf.len ? memchr(l->buf.data + from, '\n', l->buf.len - from) : NULL;
    if (!nl) {
        l->scanned = l->buf.len;
        return false;
    }
    size_t end = (size_t)(nl - l->buf.data);
    *line = l->buf.data + l->start;
    *len = end - l->start;
    l->start = end + 1;
    l->scanned = l->start;
    return true;
}

size_t mc_lines_rest(const mc_lines *l, const char **p) {
    if (p)
        *p = l->buf.data ? l->buf.data + l->start : "";
    return l->buf.len - l->start;
}

void mc_lines_clear(mc_lines *l) {
    mc_buf_clear(&l->buf);
    l->start = 0;
    l->scanned = 0;
}
