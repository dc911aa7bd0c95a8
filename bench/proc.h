/* What bench_load reads about the server from /proc. */
#ifndef BENCH_PROC_H
#define BENCH_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* utime + stime from /proc/pid/stat, in ns (clock-tick resolution).
 * Returns -1 when the process is gone. */
int64_t bench_proc_stat_cpu_ns(pid_t pid);
/* utime and stime apart (user and kernel time), in ns; -1 when gone. */
int bench_proc_stat_times_ns(pid_t pid, int64_t *user_ns, int64_t *sys_ns);
/* Time on CPU from /proc/pid/schedstat (ns resolution; the main thread,
 * which is the whole of a single-threaded server). -1 when unavailable. */
int64_t bench_proc_sched_cpu_ns(pid_t pid);
/* A "Key:   N kB" line of /proc/pid/status (VmRSS, VmHWM). -1 if absent. */
long bench_proc_status_kb(pid_t pid, const char *key);
/* Children of pid (from /proc/pid/task/pid/children) into out[0..max).
 * Returns their number. */
int bench_proc_children(pid_t pid, pid_t *out, int max);
/* Entries in /proc/pid/fd, or -1. */
int bench_proc_fd_count(pid_t pid);

#endif
