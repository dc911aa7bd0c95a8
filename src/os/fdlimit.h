/* The descriptor budget (issue 14): MAX_CONNECTIONS clients and three
 * pipes per worker must fit under RLIMIT_NOFILE, or accept() fails with
 * EMFILE while the spec's limits say there is room. */
#ifndef SB_FDLIMIT_H
#define SB_FDLIMIT_H

#include <sys/resource.h>

/* Beyond clients and worker pipes: stdio, the signal pipe, the listening
 * socket, the spare descriptor, the pipes of a spawn in progress. */
#define SB_FDLIMIT_MARGIN 32

/* Descriptors the daemon may hold at once with `workers` workers. */
rlim_t sb_fdlimit_need(int workers);

/* The soft limit to set: unchanged when it covers `need` already (never
 * lowered), else `need`, capped at `hard`. */
rlim_t sb_fdlimit_target(rlim_t soft, rlim_t hard, rlim_t need);

/* Raises the soft RLIMIT_NOFILE to what `workers` workers and
 * MAX_CONNECTIONS clients need; warns with the numbers when the hard limit
 * is lower. Workers inherit the raised limit. */
void sb_fdlimit_raise(int workers);

#endif
