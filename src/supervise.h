/* Worker supervision (spec 3.3, 5.3, 7.1, Appendix B): spawn, fail,
 * exit, restart, stop; connection affinity's own workers (SB-X-15,
 * SB-X-16). */
#ifndef SB_SUPERVISE_H
#define SB_SUPERVISE_H

#include "bus.h"

#include <stdbool.h>

void sb_supervise_close_fds(sb_bus *d, sb_worker *w);
int sb_supervise_spawn(sb_bus *d, sb_worker *w);
void sb_supervise_fail(sb_bus *d, sb_worker *w, sb_fail_output output, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void sb_supervise_stdin_lost(sb_bus *d, sb_worker *w);
void sb_supervise_stdout_eof(sb_bus *d, sb_worker *w);
void sb_supervise_exited(sb_bus *d, sb_worker *w, int status);
void sb_supervise_reap(sb_bus *d);
bool sb_supervise_attach(sb_bus *d, sb_peer *c);
void sb_supervise_detach(sb_bus *d, sb_peer *c);
void sb_supervise_kill_remaining(sb_bus *d);
void sb_supervise_stop_all(sb_bus *d);
/* The loop handler of a worker's stdin and stdout (data: the sb_worker). */
void sb_supervise_on_event(void *data, int fd, short revents);

#endif
