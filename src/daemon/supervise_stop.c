/* Stopping every worker at shutdown (10.2): stdin closed and SIGTERM, then
 * SIGKILL for those still running at drain_timeout_sec (SB-10.2-4). The
 * killed are reaped as any exit is, through SIGCHLD (supervise.c): the loop
 * never blocks in waitpid() on a process that may be stuck in the kernel. */
#include "log.h"
#include "relay.h"
#include "supervise.h"

#include <signal.h>

void sb_supervise_kill_remaining(sb_bus *d) {
    /* SB-10.2-4 */
    for (int i = 0; i < d->worker_count; i++) {
        sb_worker *w = &d->workers[i];
        if (w->pid <= 0 || w->reaped)
            continue;
        sb_warn(w->peer.name, "still running after drain_timeout_sec=%d: SIGKILL",
                d->limits->drain_timeout_sec);
        sb_worker_signal(w, SIGKILL);
    }
    sb_supervise_end_strays(d); /* SB-X-22: what they left, killed too */
}

void sb_supervise_report_unreaped(sb_bus *d, int waited_ms) {
    for (int i = 0; i < d->worker_count; i++) {
        const sb_worker *w = &d->workers[i];
        if (w->pid > 0 && !w->reaped)
            sb_error(w->peer.name, "pid %d not reaped %d ms after SIGKILL: exiting without it",
                     (int)w->pid, waited_ms);
    }
}

/* SB-10.2-2: at shutdown no worker is restarted; each is told to stop:
 * stdin closed, SIGTERM. */
void sb_supervise_stop_all(sb_bus *d) {
    for (int i = 0; i < d->worker_count; i++) {
        sb_worker *w = &d->workers[i];
        sb_supervise_restart_at(d, w, 0);
        if (w->pid <= 0)
            continue;
        if (w->state == SB_WORKER_RUNNING)
            sb_worker_enter(w, SB_WORKER_STOPPING, &d->router);
        if (w->peer.out_fd >= 0)
            sb_relay_close_stdin(
                d, &w->peer); /* its queue is dropped too, and no longer counts as full */
        sb_worker_signal(w, SIGTERM);
        sb_info(w->peer.name, "SIGTERM sent");
        sb_watch_update(d, &w->peer);
    }
}
