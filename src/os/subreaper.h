/* The daemon as the reaper of its workers' orphaned descendants (SB-X-22):
 * the OS side (Linux: PR_SET_CHILD_SUBREAPER, /proc). What to do with them
 * is supervise_strays.c's; which ones, strays.c's. */
#ifndef SB_SUBREAPER_H
#define SB_SUBREAPER_H

#include "strays.h"

#include <stdbool.h>

/* Makes the calling process a child subreaper: a descendant whose parent
 * exits is re-parented to it, not to init, and its exit is reaped here.
 * Returns 0, or STDIO_BUS_ERR with errno set (ENOSYS off Linux). */
int sb_subreaper_start(void);

/* Lists the calling process's children (live or not yet reaped) with their
 * process groups, from /proc/self/task/<tid>/children: at most cap, and
 * *more set when some did not fit. Returns how many, or STDIO_BUS_ERR with
 * errno set when /proc cannot tell. */
int sb_subreaper_children(sb_stray *kids, int cap, bool *more);

/* SIGKILL to the child, and to its process group when it leads one (its pid,
 * which it holds until reaped, is the group's id: no one else's). */
void sb_subreaper_kill(const sb_stray *s);

#endif
