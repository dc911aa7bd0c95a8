/* stdin cut into lines. Bytes are read as they come (stdin is
 * non-blocking) and handed out one complete line at a time, without its
 * newline; the bytes after the last newline wait for more input or for
 * EOF. The caller decides what a line is worth: nothing here parses. */
#ifndef MC_LINES_H
#define MC_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/buf.h"

typedef struct mc_lines {
    mc_buf buf;
    size_t start;   /* first byte not yet handed out */
    size_t scanned; /* buf[start, scanned) holds no newline */
} mc_lines;

void mc_lines_init(mc_lines *l);
void mc_lines_fini(mc_lines *l);
/* One read(2) of up to 64 KiB from fd, appended; the lines handed out
 * before are dropped first (their pointers die). Returns the byte count,
 * 0 when nothing is there yet (EAGAIN), MC_EOF at end of input, MC_ERR on a
 * read error (errno set). */
ssize_t mc_lines_read(mc_lines *l, int fd);
/* The next complete line: true with *line and *len (newline excluded;
 * *line points into l until the next mc_lines_read or mc_lines_clear);
 * false when no complete line is buffered. */
bool mc_lines_next(mc_lines *l, const char **line, size_t *len);
/* The bytes not handed out yet (an unfinished line, or lines nobody asked
 * for): their count, and where they start in *p when p is not NULL. */
size_t mc_lines_rest(const mc_lines *l, const char **p);
/* Forgets everything buffered. */
void mc_lines_clear(mc_lines *l);

#endif
