/* NDJSON framing (spec 2.2, 4.2.1, 7.3.2): a per-connection input buffer
 * that yields complete lines and enforces max_input_buffer.
 *
 * The buffer owns its storage. It starts empty (no allocation, so an idle
 * connection costs nothing) and grows geometrically up to `max` bytes. Lines
 * returned by sb_frame_next point into the buffer and stay valid until the
 * next call to sb_frame_space, sb_frame_commit or sb_frame_fini. */
#ifndef SB_FRAME_H
#define SB_FRAME_H

#include <stddef.h>

/* A busy peer's storage grows to this size even when its lines are short,
 * which is the read size of libuv (64 KiB): one poll round then moves a
 * pipe's worth of lines. The idle sweep gives it back. */
#define SB_FRAME_BUSY_CAP 65536

typedef struct {
    char *data;
    size_t start;   /* first byte not yet returned as a line */
    size_t scanned; /* bytes after start already known to hold no '\n' */
    size_t len;     /* bytes in data */
    size_t cap;     /* bytes allocated */
    size_t max;     /* max_input_buffer: a line incl. its '\n' must fit */
    int filled;     /* the last read took all the space offered */
    size_t ahead;   /* look-ahead: lines from start up to here were passed over (SB-I-54) */
} sb_frame;

/* Sets up an empty buffer; allocates nothing. */
void sb_frame_init(sb_frame *f, size_t max);
/* Frees the storage; the frame may be initialised again. */
void sb_frame_fini(sb_frame *f);

/* Makes room for a read and returns where to read into; *avail gets how
 * many bytes may be read (at least 1). Moves the unread bytes to the front
 * and grows the storage as needed, never beyond max.
 * Returns NULL with *avail = 0 when the buffered partial line already holds
 * max bytes (the caller must treat it as overflow), or when out of memory
 * (errno = ENOMEM). Call it once sb_frame_next has returned EAGAIN: then a
 * NULL return can only mean out of memory, since the partial line is
 * shorter than max and room is left. */
char *sb_frame_space(sb_frame *f, size_t *avail);
/* Records that n bytes were read into the space returned above. A read
 * that fills the whole space marks the peer as busy: the next
 * sb_frame_space doubles the storage (up to SB_FRAME_BUSY_CAP) so that a
 * busy peer is served with few large reads rather than one read per line. */
void sb_frame_commit(sb_frame *f, size_t n);

/* Finds the next complete line.
 * Returns its length including the '\n' (> 0) and sets *line;
 *         STDIO_BUS_EAGAIN when no complete line is buffered yet;
 *         STDIO_BUS_EFULL when the partial line buffered has reached max
 *         bytes without a '\n' (SB-7.3.2: close the connection). */
long sb_frame_next(sb_frame *f, const char **line);

/* Gives back the line of n bytes that sb_frame_next returned last, so the
 * next call returns it again (a line that cannot be routed yet, SB-I-45).
 * Call it before any sb_frame_space or sb_frame_commit. */
void sb_frame_unread(sb_frame *f, size_t n);

/* Look-ahead past a line that must wait (SB-I-54: a held client's
 * answers to its workers' requests are not kept behind its held request).
 * sb_frame_hold marks the line of n bytes just given back by
 * sb_frame_unread as the one that waits; sb_frame_peek returns the next
 * complete line after it and those already passed over (> 0, its length)
 * or STDIO_BUS_EAGAIN, without returning it; sb_frame_pass passes over it
 * (it stays, in its place), sb_frame_cut removes it from the buffer. The
 * lines passed over are returned by sb_frame_next in their order. */
void sb_frame_hold(sb_frame *f, size_t n);
long sb_frame_peek(const sb_frame *f, const char **line);
void sb_frame_pass(sb_frame *f, size_t n);
void sb_frame_cut(sb_frame *f, size_t n);
/* Bytes that may still be read before the buffer holds max_input_buffer
 * bytes not yet returned (0: a held input is not read, SB-I-54). */
size_t sb_frame_room(const sb_frame *f);

/* Bytes buffered and not yet returned as lines. */
size_t sb_frame_pending(const sb_frame *f);

/* Of those, the complete lines (held back, or not reached yet), and in
 * *partial the bytes after the last newline: what a close discards. */
size_t sb_frame_unreturned_lines(const sb_frame *f, size_t *partial);

/* Releases the storage if nothing is buffered, so an idle connection does
 * not keep a large buffer after one big message. */
void sb_frame_shrink(sb_frame *f);

#endif
