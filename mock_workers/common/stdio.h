/* The worker's end of the bus as its poll loop sees it: stdin and stdout
 * non-blocking, stderr left blocking (it may be shared with the daemon),
 * and the self-pipe that SIGTERM and SIGINT arrive through. */
#ifndef MC_STDIO_H
#define MC_STDIO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct mc_stdio {
    int sig_fd;   /* read end of the self-pipe; -1: none */
    int flags[2]; /* stdin's and stdout's file status flags before; -1: untouched */
} mc_stdio;

/* A closed mc_stdio, safe to pass to mc_stdio_close. */
#define MC_STDIO_CLOSED                                                                            \
    {                                                                                              \
        .sig_fd = -1, .flags = { -1, -1 }                                                          \
    }

/* What woke mc_stdio_wait. */
typedef struct mc_ready {
    bool sig, in, out;
} mc_ready;

/* Installs the signal self-pipe (common/sig.h), then makes stdin and stdout
 * non-blocking. Returns MC_OK, or MC_ERR after a note on stderr; either
 * way s is ready for mc_stdio_close. */
int mc_stdio_open(mc_stdio *s);
/* Puts the flags of stdin and stdout back (they belong to open file
 * descriptions the worker may share: a terminal, a pipe the daemon keeps)
 * and closes the self-pipe. */
void mc_stdio_close(mc_stdio *s);
/* Waits up to timeout_ms (-1: no limit) for a signal, for input when
 * want_in, for room on stdout when want_out. Any event on an fd counts
 * (hang-up, error, even an invalid fd), so the read or write that follows
 * meets it. Returns MC_OK with *r set, MC_EAGAIN when a signal interrupted
 * the wait (nothing set: wait again), MC_ERR after a note on stderr. */
int mc_stdio_wait(const mc_stdio *s, bool want_in, bool want_out, int timeout_ms, mc_ready *r);
/* One write(2) of p[0..n), n > 0, to the non-blocking fd, retried on
 * EINTR. Returns the bytes written, 0 when the pipe is full, MC_EOF when
 * its reader is gone (EPIPE), MC_ERR on another error (errno set). */
ssize_t mc_stdio_write(int fd, const void *p, size_t n);

#endif
