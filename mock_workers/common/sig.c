/* Self-pipe signal handling (see sig.h). */
#include "common/sig.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "common/status.h"

static int write_fd = -1;

static void on_signal(int signo) {
    int saved = errno;
    unsigned char b = (unsigned char)signo;
    ssize_t r = write(write_fd, &b, 1);
    (void)r; /* a full pipe already holds a wake-up */
    errno = saved;
}

static int prepare(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return MC_ERR;
    return fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 ? MC_ERR : MC_OK;
}

int mc_sig_open(void) {
    int fds[2];
    if (pipe(fds) < 0)
        return MC_ERR;
    if (prepare(fds[0]) < 0 || prepare(fds[1]) < 0) {
        int saved = errno;
        close(fds[0]);
        close(fds[1]);
        errno = saved;
        return MC_ERR;
    }
    write_fd = fds[1];

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    return fds[0];
}

void mc_sig_close(int fd) {
    /* Closed on the way out: a late SIGTERM (a daemon may send a second at
     * shutdown) must not cut the exit short. Under ASan, LeakSanitizer's
     * check at exit runs in a cloned tracer process, which a death by the
     * default action would leave behind. SIGKILL still works. */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    if (fd >= 0)
        close(fd);
    if (write_fd >= 0)
        close(write_fd);
    write_fd = -1;
}

int mc_sig_next(int fd) {
    unsigned char b;
    ssize_t r;
    do {
        r = read(fd, &b, 1);
    } while (r < 0 && errno == EINTR);
    return r == 1 ? b : 0;
}
