/* Output queue on the mock's stdout (non-blocking).
 *
 * Output is a FIFO of units. A unit is written with one write(2) call when
 * the pipe has room, or in `pieces` write calls `pause` apart (split
 * lines). Lines can also be held back and written N at a time in one call
 * (--coalesce). When a unit is fully written, each line of it is logged as
 * an `out` record (a final fragment without newline gets its own record). */
#ifndef MW_OUT_H
#define MW_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "log.h"

typedef struct mw_unit mw_unit;

typedef struct mw_out {
    int fd;
    const mw_log *log; /* borrowed */
    mw_unit *head, *tail;
    size_t queued; /* bytes in units, not yet written */
    mc_buf held;   /* lines held back for --coalesce */
    size_t held_lines;
    size_t coalesce; /* <= 1: no holding */
    bool stalled;    /* "stall: write": nothing new is ever queued */
} mw_out;

void mw_out_init(mw_out *o, int fd, const mw_log *log, size_t coalesce);
void mw_out_fini(mw_out *o);
/* Queues one line; a newline is appended. Subject to --coalesce. */
void mw_out_line(mw_out *o, const char *p, size_t n);
/* Queues bytes as one unit, after any held lines. pieces <= 1: one write
 * call; else `pieces` calls with pause_ns between them. newline: append
 * '\n' to the bytes. The bytes are copied. */
void mw_out_bytes(mw_out *o, const char *p, size_t n, long pieces, int64_t pause_ns, bool newline);
/* Turns held lines into a unit now (EOF, exit). */
void mw_out_release(mw_out *o);
/* Refuses all later output; what is already queued or held is still
 * written. */
void mw_out_stall(mw_out *o);
/* Writes what can be written now without blocking. Returns MC_OK, MC_EOF
 * when the reader is gone (EPIPE) or MC_ERR on another write error. */
int mw_out_write(mw_out *o, int64_t now);
/* Bytes queued in units (held lines not counted). */
size_t mw_out_queued(const mw_out *o);
/* True when the head unit may be written now: poll for POLLOUT. */
bool mw_out_wants_pollout(const mw_out *o, int64_t now);
/* When the head unit's next piece may start, or 0. */
int64_t mw_out_deadline(const mw_out *o, int64_t now);

#endif
