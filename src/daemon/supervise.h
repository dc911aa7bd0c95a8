/* Worker supervision (spec 3.3, 5.3, 7.1, Appendix B): spawn, fail,
 * exit, restart, stop; connection affinity's own workers (SB-X-15,
 * SB-X-16). */
#ifndef SB_SUPERVISE_H
#define SB_SUPERVISE_H

#include "bus.h"
#include "relay.h"

#include <stdbool.h>
#include <stdint.h>

void sb_supervise_close_fds(sb_bus *d, sb_worker *w);
int sb_supervise_spawn(sb_bus *d, sb_worker *w);
void sb_supervise_fail(sb_bus *d, sb_worker *w, sb_fail_output output, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Workers whose stdin broke this round (d->stdin_lost): if one is still
 * running a moment later, it closed its stdin (SB-I-39). */
void sb_supervise_stdin_lost(sb_bus *d);
/* Acts on what the relay reported for the worker's output. */
void sb_supervise_verdict(sb_bus *d, sb_worker *w, sb_relay_verdict v);
void sb_supervise_stdout_eof(sb_bus *d, sb_worker *w);
/* What a worker's exit was, for what follows it: its connections ended
 * (sb_supervise_affinity_exited) and its restart (sb_supervise_after_exit).
 * The exit itself returns it, as the relay returns verdicts, rather than
 * call what follows. */
typedef struct {
    bool retired; /* its client had left (SB-X-19): recycled, not failed */
} sb_worker_exit;
/* SB-7.1.2: the exit of w, reaped with status: its last lines routed, its
 * state STOPPED, its pipes closed, its sessions and pending requests gone. */
sb_worker_exit sb_supervise_exited(sb_bus *d, sb_worker *w, int status);
/* SB-7.1.3, SB-X-20: w's restart after the exit e, per policy; nothing at
 * shutdown, and at once for a retired worker. */
void sb_supervise_after_exit(sb_bus *d, sb_worker *w, sb_worker_exit e);
/* SB-7.1.1: reaps every child that exited; for a worker: its exit, then
 * the connections it ends, then its restart. */
void sb_supervise_reap(sb_bus *d);
/* Schedules the worker's (re)start at `at` (ms). */
void sb_supervise_restart_at(sb_bus *d, sb_worker *w, int64_t at);
/* A worker's timer (SB_TIMER_RESTART, _KILL, _LOST, _FULL) fired. */
void sb_supervise_timer(sb_bus *d, sb_worker *w, int which, int64_t now);
/* supervise_affinity.c (SB-X-10..SB-X-16) */
bool sb_supervise_attach(sb_bus *d, sb_client *c);
/* A client's end (sb_bus.client_end, its one route here): ended, when it is
 * the only client bound to its worker, retires the worker now (SB-X-19);
 * gone, unbinds it and retires a worker it leaves with no client (SB-X-16,
 * SB-X-20). */
void sb_supervise_client_end(sb_bus *d, sb_client *c, sb_client_end how);
/* Whether a new connection would get a worker now: always but in a
 * per_connection pool with `instances` workers serving (SB-X-15, SB-X-21)
 * or no slot free of an exiting one (SB-X-23). */
bool sb_supervise_has_room(const sb_bus *d);
/* SB-X-23: for a connection waiting, when fewer than `instances` serve but
 * no slot is free, SIGKILL to the worker retiring longest: its slot frees
 * once it is reaped. */
void sb_supervise_make_room(sb_bus *d);
/* supervise.c: SB-X-16, SB-X-19: w's only client ended: its stdin closes
 * (once its queue is written), SIGTERM after stop_grace_ms. */
void sb_supervise_retire(sb_bus *d, sb_worker *w);
/* SB-I-53: while the requests of departed clients are over their budget,
 * fails (5.3) the running worker that holds the most of them. */
void sb_supervise_shed_orphans(sb_bus *d);
void sb_supervise_kill_remaining(sb_bus *d);
/* At the end of SB_KILL_REAP_MS: logs each worker SIGKILLed and still not reaped. */
void sb_supervise_report_unreaped(sb_bus *d, int waited_ms);
/* supervise_strays.c (SB-X-22): under connection affinity, makes the daemon
 * a child subreaper (a warning when it cannot be one). */
void sb_supervise_reaper_start(sb_bus *d);
/* Looks at the daemon's children: SIGKILL to each that is not a running
 * worker nor in the process group of one (re-parented to the daemon after
 * leaving its worker's group); d->reaper.left counts the non-workers. */
void sb_supervise_end_strays(sb_bus *d);
void sb_supervise_stop_all(sb_bus *d);
#endif
