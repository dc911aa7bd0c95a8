/* Strays (SB-X-22): under connection affinity the daemon is a child
 * subreaper, so what a worker started and left outside its process group
 * (setsid, a double fork) comes back to the daemon when its parent exits,
 * instead of to init, and is killed: a connection's server takes what it
 * started with it, as SB-X-18 does for its group. */
#include "log.h"
#include "subreaper.h"
#include "supervise.h"

#include <errno.h>
#include <string.h>

/* Children judged at one look; the rest at the next, which the exits of
 * these bring. */
#define SB_STRAYS_PER_LOOK 128

void sb_supervise_reaper_start(sb_bus *d) {
    if (d->cfg->affinity == SB_AFFINITY_NONE)
        return; /* long-lived shared workers keep the spec's model: their orphans go to init */
    sb_reaper *r = &d->reaper;
    sb_stray kids[SB_REAPER_SPARED];
    bool more;
    int n = sb_subreaper_children(kids, SB_REAPER_SPARED, &more); /* also: /proc tells */
    if (n >= 0 && more)
        errno = EMFILE; /* too many children of its own to tell from strays */
    r->on = n >= 0 && !more && sb_subreaper_start() == 0;
    if (!r->on) {
        sb_warn(NULL,
                "cannot become the reaper of the workers' orphans (%s): what a worker starts "
                "outside its process group may outlive it",
                strerror(errno));
        return;
    }
    for (int i = 0; i < n; i++)
        r->spared[r->spared_count++] = kids[i].pid;
    if (n)
        sb_info(NULL, "%d child process(es) from before start: no worker's, left alone", n);
}

/* A spared child the daemon has reaped since is no longer among its
 * children: its pid may be anyone's next. */
static void forget_reaped(sb_reaper *r, const sb_stray *kids, int n) {
    for (int i = 0; i < r->spared_count;) {
        bool child = false;
        for (int k = 0; k < n && !child; k++)
            child = kids[k].pid == r->spared[i];
        if (child)
            i++;
        else
            r->spared[i] = r->spared[--r->spared_count];
    }
}

void sb_supervise_end_strays(sb_bus *d) {
    sb_reaper *r = &d->reaper;
    if (!r->on)
        return;
    int nw = 0;
    for (int i = 0; i < d->worker_count; i++)
        if (d->workers[i].pid > 0 && !d->workers[i].reaped)
            r->workers[nw++] = d->workers[i].pid;
    sb_stray kids[SB_STRAYS_PER_LOOK];
    bool more;
    int n = sb_subreaper_children(kids, SB_STRAYS_PER_LOOK, &more);
    if (n < 0) {
        sb_error(NULL, "cannot list the daemon's children (%s): no longer ending workers' strays",
                 strerror(errno));
        r->on = false;
        r->left = 0;
        return;
    }
    if (!more)
        forget_reaped(r, kids, n);
    for (int i = 0; i < r->spared_count; i++) /* neither killed nor waited for at shutdown */
        r->workers[nw++] = r->spared[i];
    int doomed = sb_strays_doomed(kids, n, r->workers, nw, &r->left);
    if (more && !r->left)
        r->left = 1; /* not all seen: shutdown waits for the next look */
    for (int i = 0; i < doomed; i++) {
        /* Reaped as any child is (sb_supervise_reap): not a worker's exit. */
        sb_info(NULL, "pid %d (process group %d), left by a worker outside its group: SIGKILL",
                (int)kids[i].pid, (int)kids[i].pgid);
        sb_subreaper_kill(&kids[i]);
    }
}
