/* Signals: TERM and INT arrive through a self-pipe that the poll loop
 * watches like any other fd; the handler only saves errno and writes the
 * signal number. Also names <-> numbers and raising a signal on oneself. */
#ifndef MW_SIGNALS_H
#define MW_SIGNALS_H

/* Installs the handlers, ignores SIGPIPE (EPIPE is handled where it
 * happens), unblocks TERM/INT in case the parent left them blocked.
 * Returns the read end of the self-pipe (owned by the caller, close it with
 * mw_signals_close) or MC_ERR. */
int mw_signals_open(void);
void mw_signals_close(int fd);
/* The next caught signal number, or 0 when none is pending. */
int mw_signals_next(int fd);
/* "SEGV", "SIGSEGV" or a number -> signal number; MC_EINVAL if unknown. */
int mw_signals_parse(const char *name);
/* Short name without "SIG" ("TERM"); "?" when unknown. */
const char *mw_signals_name(int signo);
/* Raises signo on the process. TERM and INT go through the mock's own
 * handler (so they come back through the self-pipe and this returns);
 * every other signal gets its default action first, so the process dies of
 * it even under a sanitizer that installed its own handler. */
void mw_signals_raise(int signo);

#endif
