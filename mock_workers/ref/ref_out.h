/* The queue of lines waiting for the worker's stdout (non-blocking).
 *
 * Only whole lines are queued, each written by one ref_out_line call, so
 * lines never interleave whatever the pipe takes per write(2) (SB-F-3).
 * Once the reader is gone (EPIPE) the queue is dead: later lines are
 * dropped, and the loop exits. */
#ifndef REF_OUT_H
#define REF_OUT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"

typedef struct ref_out {
    int fd;
    mc_buf q; /* queued bytes; q.data[off..len) are still to be written */
    size_t off;
    bool dead; /* EPIPE or another write error: drop everything */
} ref_out;

void ref_out_init(ref_out *o, int fd);
void ref_out_fini(ref_out *o);
/* Queues p[0..n) and a newline. The caller guarantees p holds no newline. */
void ref_out_line(ref_out *o, const char *p, size_t n);
/* Writes what the pipe takes now. Returns MC_OK (maybe with bytes left),
 * MC_EOF when the reader is gone, MC_ERR on another write error. */
int ref_out_flush(ref_out *o);
/* Bytes queued and not yet written. */
size_t ref_out_pending(const ref_out *o);

#endif
