/* Signals through a self-pipe (the skalibs selfpipe shape): the handler
 * saves errno and writes the signal number as one byte; the loop reads the
 * pipe like any other fd and does the work. */
#ifndef SB_SIGNALS_H
#define SB_SIGNALS_H

/* Installs handlers for SIGCHLD, SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1
 * and SIGUSR2, and ignores SIGPIPE.
 * Returns the read end (non-blocking, close-on-exec) or STDIO_BUS_ERR. */
int sb_signals_open(void);
/* Restores default dispositions and closes the pipe. */
void sb_signals_close(void);
/* Reads one pending signal number; returns it (> 0), or STDIO_BUS_EAGAIN
 * when none is pending. */
int sb_signals_next(void);

#endif
