#include "signals.h"
#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static int pipe_fds[2] = {-1, -1};

/* Every signal whose default action would end the daemon without its
 * shutdown sequence (SB-3.1-6, SB-I-48), and SIGCHLD. */
static const int handled[] = {SIGCHLD, SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2};

static void on_signal(int signo) {
    int saved_errno = errno;
    unsigned char byte = (unsigned char)signo;
    /* A full pipe already holds a wake-up; losing this byte loses nothing
     * because SIGCHLD handling reaps in a loop. */
    ssize_t ignored = write(pipe_fds[1], &byte, 1);
    (void)ignored;
    errno = saved_errno;
}

int sb_signals_open(void) {
    if (pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC) < 0)
        return STDIO_BUS_ERR;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++)
        if (sigaction(handled[i], &sa, NULL) < 0)
            return STDIO_BUS_ERR;
    /* A client or worker that goes away must surface as EPIPE on write,
     * not kill the daemon. */
    signal(SIGPIPE, SIG_IGN);
    return pipe_fds[0];
}

void sb_signals_close(void) {
    for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++)
        signal(handled[i], SIG_DFL);
    for (int i = 0; i < 2; i++) {
        if (pipe_fds[i] >= 0)
            close(pipe_fds[i]);
        pipe_fds[i] = -1;
    }
}

int sb_signals_next(void) {
    unsigned char byte;
    for (;;) {
        ssize_t n = read(pipe_fds[0], &byte, 1);
        if (n == 1)
            return byte;
        if (n < 0 && errno == EINTR)
            continue;
        return STDIO_BUS_EAGAIN;
    }
}
