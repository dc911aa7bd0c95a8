#include "listener.h"
#include "bus_limits.h"
#include "clients.h"
#include "clock.h"
#include "log.h"
#include "status.h"
#include "supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* accept() failed and the connection stays queued, so the listening
 * socket stays readable: polling it again at once would spin. Out of
 * descriptors, the spare one makes room to accept and close what is queued
 * (the client sees its connection closed, as beyond MAX_CONNECTIONS,
 * SB-I-18); then the listener rests a moment, for descriptors to free up.
 * One warning per episode; the count comes when accept() works again. */
#define SB_ACCEPT_BACKOFF_MS 100
#define SB_ACCEPT_SHED_MAX   64

static void accept_failed(sb_listener *ln, sb_bus *d, int fd, int err) {
    bool no_fds = err == EMFILE || err == ENFILE;
    if (!ln->accept_failing) {
        ln->accept_failing = true;
        ln->accept_refused = 0;
        if (no_fds)
            sb_warn(NULL,
                    "accept failed: %s: out of file descriptors, new connections are "
                    "closed at once until some free up",
                    strerror(err));
        else
            sb_warn(NULL, "accept failed: %s: new connections wait", strerror(err));
    }
    if (no_fds && ln->spare_fd >= 0) {
        close(ln->spare_fd);
        for (int i = 0; i < SB_ACCEPT_SHED_MAX; i++) {
            int cfd = sb_net_accept(fd);
            if (cfd < 0)
                break;
            close(cfd);
            ln->accept_refused++;
        }
        ln->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    sb_loop_set(&d->loop, fd, 0);
    sb_timers_arm(&d->timers, SB_TIMER_ACCEPT, sb_now_ms() + SB_ACCEPT_BACKOFF_MS);
}

static void accept_recovered(sb_listener *ln) {
    ln->accept_failing = false;
    sb_info(NULL, "accepting connections again; %ld connection(s) closed unserved meanwhile",
            ln->accept_refused);
}

/* SB-X-21: how long a connection waits, queued, for a per_connection
 * slot before it is refused. A client that closes and reconnects at once
 * may connect before its close is seen (its FIN behind its SYN). */
#define SB_SLOT_WAIT_MS 1000

/* Accepts what is queued. may_wait: with every per_connection worker in
 * use, what is queued waits for a slot, up to SB_SLOT_WAIT_MS (SB-X-21). */
static void accept_all(sb_listener *ln, sb_bus *d, int fd, bool may_wait) {
    for (;;) {
        if (may_wait && !sb_supervise_has_room(d)) {
            /* None waiting: the next to connect wakes the listener. One
             * waiting: it is what a slot is freed for (SB-X-23). */
            if (!sb_net_pending(fd))
                return;
            sb_supervise_make_room(d);
            ln->waiting_for_slot = true;
            sb_loop_set(&d->loop, fd, 0);
            sb_timers_arm(&d->timers, SB_TIMER_ACCEPT, sb_now_ms() + SB_SLOT_WAIT_MS);
            return;
        }
        int cfd = sb_net_accept(fd);
        if (cfd == STDIO_BUS_EAGAIN)
            return;
        if (cfd < 0) {
            accept_failed(ln, d, fd, errno);
            return;
        }
        if (ln->accept_failing)
            accept_recovered(ln);
        if (d->clients.count >= STDIO_BUS_MAX_CONNECTIONS) { /* SB-I-18 */
            sb_warn(NULL, "connection fd=%d refused: MAX_CONNECTIONS (%d) clients connected", cfd,
                    STDIO_BUS_MAX_CONNECTIONS);
            close(cfd);
            continue;
        }
        sb_client *c = sb_clients_open(d, cfd, cfd);
        if (!c) {
            sb_warn(NULL, "connection fd=%d refused: out of memory", cfd);
            close(cfd);
            continue;
        }
        sb_info(c->peer.name, "connected");
        if (!sb_supervise_attach(d, c))
            sb_clients_close(d, c); /* SB-X-15 */
    }
}

static void on_listen_event(sb_loop *l, void *data, int fd, short revents) {
    (void)revents;
    accept_all(data, sb_bus_of_loop(l), fd, true);
}

/* SB-X-21: a slot is free for the connections waiting: accept again.
 * SB-X-23: none yet, but the last worker serving may have started retiring
 * since the connection came (a client that closes and reconnects at once):
 * room is made for it now, not only when it was first seen. */
void sb_listener_slot_freed(sb_listener *ln, sb_bus *d) {
    if (!ln->waiting_for_slot)
        return;
    if (!sb_supervise_has_room(d)) {
        sb_supervise_make_room(d);
        return;
    }
    ln->waiting_for_slot = false;
    sb_timers_disarm(&d->timers, SB_TIMER_ACCEPT);
    if (ln->fd >= 0)
        sb_loop_set(&d->loop, ln->fd, POLLIN);
}

void sb_listener_resume(sb_listener *ln, sb_bus *d) {
    if (ln->fd < 0)
        return;
    if (ln->waiting_for_slot) { /* SB-X-21: waited long enough */
        ln->waiting_for_slot = false;
        accept_all(ln, d, ln->fd, false);
    }
    sb_loop_set(&d->loop, ln->fd, POLLIN);
}

void sb_listener_init(sb_listener *ln) {
    *ln = (sb_listener){.fd = -1, .spare_fd = -1};
}

int sb_listener_start(sb_listener *ln, sb_bus *d, const sb_options *opt) {
    char err[512];
    if (opt->mode == SB_MODE_UNIX) {
        ln->fd = sb_net_listen_unix(opt->address, &ln->unix_id, err, sizeof err);
        if (ln->fd < 0) {
            sb_error(NULL, "%s", err);
            return STDIO_BUS_ERR;
        }
        ln->unix_path = opt->address;
        sb_info(NULL, "listening on unix:%s", opt->address);
    } else {
        char host[256], port[16], bound[300];
        sb_cli_split_host_port(opt->address, host, sizeof host, port, sizeof port);
        ln->fd = sb_net_listen_tcp(host, port, bound, sizeof bound, err, sizeof err);
        if (ln->fd < 0) {
            sb_error(NULL, "%s", err);
            return STDIO_BUS_ERR;
        }
        sb_info(NULL, "listening on tcp:%s", bound);
    }
    ln->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (sb_loop_add(&d->loop, ln->fd, POLLIN, on_listen_event, ln) < 0)
        return STDIO_BUS_ERR;
    return STDIO_BUS_OK;
}
