/* Stopping every worker at shutdown (10.2): stdin closed and SIGTERM, then
 * SIGKILL for those still running at drain_timeout_sec (SB-10.2-4). */
#include "log.h"
#include "relay.h"
#include "supervise.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

void sb_supervise_kill_remaining(sb_bus *d) {
    /* SB-10.2-4 */
    for (int i = 0; i < d->worker_count; i++) {
        sb_worker *w = &d->workers[i];
        if (w->pid <= 0)
            continue;
        sb_warn(w->peer.name, "still running after drain_timeout_sec=%d: SIGKILL",
                d->limits->drain_timeout_sec);
        sb_worker_signal(w, SIGKILL);
        int status;
        while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR) {
        }
        w->reaped = true;
        sb_supervise_exited(d, w, status);
    }
    sb_supervise_end_strays(d); /* SB-X-22: what they left, killed too */
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
            sb_worker_enter(w, SB_WORKER_STOPPING);
        sb_router_set_running(&d->router, w->id, false);
        if (w->peer.out_fd >= 0)
            sb_relay_close_stdin(
                d, &w->peer); /* its queue is dropped too, and no longer counts as full */
        sb_worker_signal(w, SIGTERM);
        sb_info(w->peer.name, "SIGTERM sent");
        sb_watch_update(d, &w->peer);
    }
}
