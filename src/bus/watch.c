#include "watch.h"

static bool may_read(const sb_bus *d, const sb_peer *p, sb_client_state state) {
    if (p->in_fd < 0 || p->in_eof || p->blocked_on)
        return false;
    if (p->kind == SB_PEER_CLIENT)
        switch (state) {
        case SB_CLIENT_OPEN:
            return d->phase == SB_PHASE_SERVING; /* SB-I-21: stop reading clients at shutdown */
        case SB_CLIENT_HELD: /* SB-I-54: read for its answers while its buffer has room */
            return d->phase == SB_PHASE_SERVING && sb_frame_room(&p->in) > 0;
        case SB_CLIENT_FREE:
        case SB_CLIENT_ENDING:  /* SB-I-41 */
        case SB_CLIENT_CLOSING: /* SB-X-14 */
        case SB_CLIENT_DOOMED:
            return false;
        }
    return sb_worker_routes_output(&d->workers[p->index]);
}

void sb_watch_update(sb_bus *d, sb_peer *p) {
    sb_client_state state = sb_peer_client_state(p); /* a worker's: FREE */
    short in_events = may_read(d, p, state) ? POLLIN : 0;
    short out_events = sb_outq_len(&p->out) && state != SB_CLIENT_DOOMED ? POLLOUT : 0;
    if (p->in_parked && in_events) { /* resumed: watch the hung-up input again */
        p->in_parked = false;
        if (sb_loop_add(&d->loop, p->in_fd,
                        p->in_fd == p->out_fd ? in_events | out_events : in_events, p->on_event,
                        p) < 0)
            p->in_parked = true;
        return;
    }
    if (p->in_fd >= 0 && p->in_fd == p->out_fd) {
        sb_loop_set(&d->loop, p->in_fd, in_events | out_events);
        return;
    }
    if (p->in_fd >= 0 && !p->in_parked)
        sb_loop_set(&d->loop, p->in_fd, in_events);
    if (p->out_fd >= 0)
        sb_loop_set(&d->loop, p->out_fd, out_events);
}

/* A paused input that hangs up would wake poll() forever (POLLHUP cannot
 * be masked): take it off the loop until it is resumed; what it still
 * holds is read then. Returns true when the input is paused (the event is
 * absorbed: nothing may be read now). */
bool sb_watch_park_if_paused(sb_bus *d, sb_peer *p, int fd, short revents) {
    if (!p->blocked_on || fd != p->in_fd)
        return false;
    if (revents & (POLLHUP | POLLERR)) {
        sb_loop_del(&d->loop, fd);
        p->in_parked = true;
    }
    return true;
}
