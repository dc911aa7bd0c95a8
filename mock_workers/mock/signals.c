/* Signal names and raising a signal on oneself (see signals.h). */
#include "signals.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

static const struct {
    const char *name;
    int signo;
} names[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ILL", SIGILL},   {"TRAP", SIGTRAP},
    {"ABRT", SIGABRT}, {"BUS", SIGBUS},   {"FPE", SIGFPE},   {"KILL", SIGKILL}, {"USR1", SIGUSR1},
    {"SEGV", SIGSEGV}, {"USR2", SIGUSR2}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM},
};

int mw_signals_parse(const char *name) {
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

const char *mw_signals_name(int signo) {
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].signo == signo)
            return names[i].name;
    return "?";
}

void mw_signals_raise(int signo) {
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
