/* SIGTERM and SIGINT through a self-pipe: the handler saves errno and
 * writes the signal number; the poll loop reads it like any other fd. */
#ifndef REF_SIG_H
#define REF_SIG_H

/* Installs the handlers, ignores SIGPIPE (EPIPE is handled where the write
 * fails) and unblocks TERM/INT in case the parent left them blocked.
 * Returns the read end of the pipe, or MC_ERR. */
int ref_sig_open(void);
/* Restores the default actions and closes both ends. */
void ref_sig_close(int fd);
/* The next caught signal number, or 0 when none is pending. */
int ref_sig_next(int fd);

#endif
