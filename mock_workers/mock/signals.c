/* Self-pipe signal handling (see signals.h). */
#include "signals.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "status.h"

static int sig_write_fd = -1;

static const struct {
    const char *name;
    int signo;
} names[] = {
    { "HUP", SIGHUP },   { "INT", SIGINT },   { "QUIT", SIGQUIT }, { "ILL", SIGILL },
    { "TRAP", SIGTRAP }, { "ABRT", SIGABRT }, { "BUS", SIGBUS },   { "FPE", SIGFPE },
    { "KILL", SIGKILL }, { "USR1", SIGUSR1 }, { "SEGV", SIGSEGV }, { "USR2", SIGUSR2 },
    { "PIPE", SIGPIPE }, { "ALRM", SIGALRM }, { "TERM", SIGTERM },
};

static void on_signal(int signo)
{
    int saved = errno;
    unsigned char b = (unsigned char)signo;
    ssize_t r = write(sig_write_fd, &b, 1);
    (void)r; /* a full pipe already holds a wake-up */
    errno = saved;
}

static int set_flags(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return MC_ERR;
    return fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 ? MC_ERR : MC_OK;
}

int mw_signals_open(void)
{
    int fds[2];
    if (pipe(fds) < 0)
        return MC_ERR;
    if (set_flags(fds[0]) < 0 || set_flags(fds[1]) < 0) {
        close(fds[0]);
        close(fds[1]);
        return MC_ERR;
    }
    sig_write_fd = fds[1];

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

void mw_signals_close(int fd)
{
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    if (fd >= 0)
        close(fd);
    if (sig_write_fd >= 0)
        close(sig_write_fd);
    sig_write_fd = -1;
}

int mw_signals_next(int fd)
{
    unsigned char b;
    ssize_t r;
    do {
        r = read(fd, &b, 1);
    } while (r < 0 && errno == EINTR);
    return r == 1 ? b : 0;
}

int mw_signals_parse(const char *name)
{
    if (strncmp(name, "SIG", 3) == 0)
        name += 3;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0)
            return names[i].signo;
    char *end;
    long v = strtol(name, &end, 10);
    if (*name && !*end && v > 0 && v < 65)
        return (int)v;
    return MC_EINVAL;
}

const char *mw_signals_name(int signo)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].signo == signo)
            return names[i].name;
    return "?";
}

void mw_signals_raise(int signo)
{
    if (signo == SIGTERM || signo == SIGINT) {
        raise(signo);
        return;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(signo, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(signo);
    /* Only signals whose default action is to ignore get here. */
}
