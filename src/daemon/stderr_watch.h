/* Log lines that stderr could not take were dropped (log.c): stderr is
 * watched on the loop until it takes lines again, so that the count of
 * those dropped is written even if no new line comes. */
#ifndef SB_STDERR_WATCH_H
#define SB_STDERR_WATCH_H

#include "loop.h"

typedef struct {
    int state;          /* 1 = waiting for stderr, -1 = it failed, 0 = not watched */
    unsigned failed_at; /* sb_log_clears when state became -1 */
} sb_stderr_watch;

/* Once a turn while log lines wait (sb_log_backlog): watches stderr on
 * loop, unless it is watched already or failed with nothing taken since. */
void sb_stderr_watch_tend(sb_stderr_watch *sw, sb_loop *loop);

#endif
