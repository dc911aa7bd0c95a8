/* Strays (SB-X-22): processes re-parented to the daemon, a child subreaper
 * under connection affinity, that are not its workers: what a worker
 * started and left behind outside its process group. Pure: this reads the
 * text the kernel gives and judges pids; subreaper.c does the I/O. */
#ifndef SB_STRAYS_H
#define SB_STRAYS_H

#include <stddef.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;
    pid_t pgid; /* its process group */
} sb_stray;

/* Parses the text of a /proc/<pid>/task/<tid>/children file: decimal pids,
 * each followed by one space. A last number with no space after it was cut
 * by a short read and is not taken. Stores at most cap pids in out.
 * Returns how many were stored, STDIO_BUS_EFULL when there were more than
 * cap (out holds the first cap), STDIO_BUS_ERR when the text is not that. */
int sb_strays_parse(const char *text, size_t len, pid_t *out, int cap);

/* SB-X-22: keeps at the front of kids[0..n), in their order, the children
 * to kill: those that are not a worker (workers[0..nw), the pids of
 * workers not yet reaped) and not in the process group of one (a worker
 * leads its group, SB-X-18: what stays in it goes with it). *strays gets
 * how many of the n are not workers. Returns how many are kept. */
int sb_strays_doomed(sb_stray *kids, int n, const pid_t *workers, int nw, int *strays);

#endif
