/* stdout queue (see ref_out.h). */
#include "ref_out.h"

#include "common/status.h"
#include "common/stdio.h"

/* Compact the buffer once this much has been written from its front. */
#define COMPACT_AT 65536

void ref_out_init(ref_out *o, int fd) {
    o->fd = fd;
    mc_buf_init(&o->q);
    o->off = 0;
    o->dead = false;
}

void ref_out_fini(ref_out *o) {
    mc_buf_fini(&o->q);
    o->off = 0;
}

void ref_out_line(ref_out *o, const char *p, size_t n) {
    if (o->dead)
        return;
    mc_buf_append(&o->q, p, n);
    mc_buf_append(&o->q, "\n", 1);
}

int ref_out_flush(ref_out *o) {
    if (o->dead)
        return MC_EOF;
    while (o->off < o->q.len) {
        ssize_t w = mc_stdio_write(o->fd, o->q.data + o->off, o->q.len - o->off);
        if (w == 0)
            break; /* the pipe is full: POLLOUT */
        if (w < 0) {
            o->dead = true;
            mc_buf_clear(&o->q);
            o->off = 0;
            return (int)w; /* MC_EOF when the reader is gone */
        }
        o->off += (size_t)w;
    }
    if (o->off == o->q.len) {
        mc_buf_clear(&o->q);
        o->off = 0;
    } else if (o->off >= COMPACT_AT) {
        mc_buf_consume(&o->q, o->off);
        o->off = 0;
    }
    return MC_OK;
}

size_t ref_out_pending(const ref_out *o) {
    return o->q.len - o->off;
}
