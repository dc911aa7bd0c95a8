/* The worker's stdin, stdout and self-pipe (see stdio.h). */
#include "common/stdio.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "common/diag.h"
#include "common/sig.h"
#include "common/status.h"

/* Sets O_NONBLOCK; *saved gets the flags before. */
static int set_nonblocking(int fd, int *saved) {
    int fl = fcntl(fd, F_GETFL);
    *saved = fl;
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return MC_ERR;
    return MC_OK;
}

int mc_stdio_open(mc_stdio *s) {
    *s = (mc_stdio)MC_STDIO_CLOSED;
    s->sig_fd = mc_sig_open();
    if (s->sig_fd < 0) {
        mc_diag_note("cannot set up signals: %s", strerror(errno));
        return MC_ERR;
    }
    /* Only stdin and stdout: stderr may be shared with the daemon. */
    if (set_nonblocking(STDIN_FILENO, &s->flags[0]) < 0 ||
        set_nonblocking(STDOUT_FILENO, &s->flags[1]) < 0) {
        mc_diag_note("cannot make stdin/stdout non-blocking: %s", strerror(errno));
        return MC_ERR;
    }
    return MC_OK;
}

void mc_stdio_close(mc_stdio *s) {
    if (s->flags[0] >= 0)
        fcntl(STDIN_FILENO, F_SETFL, s->flags[0]);
    if (s->flags[1] >= 0)
        fcntl(STDOUT_FILENO, F_SETFL, s->flags[1]);
    if (s->sig_fd >= 0)
        mc_sig_close(s->sig_fd);
    *s = (mc_stdio)MC_STDIO_CLOSED;
}

int mc_stdio_wait(const mc_stdio *s, bool want_in, bool want_out, int timeout_ms, mc_ready *r) {
    struct pollfd fds[3];
    nfds_t n = 0;
    fds[n++] = (struct pollfd){.fd = s->sig_fd, .events = POLLIN};
    int in = -1, out = -1;
    if (want_in) {
        in = (int)n;
        fds[n++] = (struct pollfd){.fd = STDIN_FILENO, .events = POLLIN};
    }
    if (want_out) {
        out = (int)n;
        fds[n++] = (struct pollfd){.fd = STDOUT_FILENO, .events = POLLOUT};
    }
    *r = (mc_ready){false, false, false};
    if (poll(fds, n, timeout_ms) < 0) {
        if (errno == EINTR)
            return MC_EAGAIN;
        mc_diag_note("poll: %s", strerror(errno));
        return MC_ERR;
    }
    r->sig = fds[0].revents != 0;
    r->in = in >= 0 && fds[in].revents != 0;
    r->out = out >= 0 && fds[out].revents != 0;
    return MC_OK;
}

ssize_t mc_stdio_write(int fd, const void *p, size_t n) {
    for (;;) {
        ssize_t w = write(fd, p, n);
        if (w > 0)
            return w;
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (w < 0 && errno == EPIPE)
            return MC_EOF;
        if (w == 0)
            errno = EIO; /* nothing written, no reason given: not progress */
        return MC_ERR;
    }
}
