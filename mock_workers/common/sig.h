/* SIGTERM and SIGINT through a self-pipe: the handler saves errno and
 * writes the signal number; the poll loop reads it like any other fd. */
#ifndef MC_SIG_H
#define MC_SIG_H

/* Installs the handlers, ignores SIGPIPE (EPIPE is handled where the write
 * fails) and unblocks TERM/INT in case the parent left them blocked.
 * Returns the read end of the pipe (close it with mc_sig_close), or
 * MC_ERR (errno set). */
int mc_sig_open(void);
/* Restores the default actions and closes both ends (fd may be -1). */
void mc_sig_close(int fd);
/* The next caught signal number, or 0 when none is pending. */
int mc_sig_next(int fd);

#endif
