#include "client_state.h"
#include "clock.h"
#include "log.h"
#include "watch.h"

#include <stddef.h>

const char *sb_client_state_name(sb_client_state s) {
    static const char *const names[] = {
        [SB_CLIENT_FREE] = "FREE",       [SB_CLIENT_OPEN] = "OPEN",
        [SB_CLIENT_HELD] = "HELD",       [SB_CLIENT_ENDING] = "ENDING",
        [SB_CLIENT_CLOSING] = "CLOSING", [SB_CLIENT_DOOMED] = "DOOMED",
    };
    return names[s];
}

static int64_t seconds_from_now(int sec) {
    return sb_now_ms() + (int64_t)sec * 1000;
}

/*   FREE -> OPEN                       connected (7.2), or the stdio client
 *   OPEN -> HELD                       SB-I-45: its next line's id is in use
 *   HELD -> OPEN                       released at the end of a round
 *   OPEN, HELD -> ENDING               its input ended (SB-I-41, SB-I-5); a
 *                                      held client's line is offered first
 *   ENDING -> HELD                     a line of an ended input is held
 *   OPEN, HELD, ENDING -> CLOSING      SB-X-14: its worker exited
 *   any but FREE -> DOOMED             closed at the end of the round
 *   OPEN, DOOMED -> FREE               closed (OPEN: refused, SB-X-15)
 * Entering ENDING with all its input forwarded, or DOOMED, is the client's
 * end: d->client_end tells its worker's supervision at once (SB-X-19). */
void sb_client_enter(sb_bus *d, sb_client *c, sb_client_state to) {
    enum {
        FREE = 1u << SB_CLIENT_FREE,
        OPEN = 1u << SB_CLIENT_OPEN,
        HELD = 1u << SB_CLIENT_HELD,
        ENDING = 1u << SB_CLIENT_ENDING,
        CLOSING = 1u << SB_CLIENT_CLOSING,
        DOOMED = 1u << SB_CLIENT_DOOMED
    };
    static const unsigned char allowed[] = {
        [SB_CLIENT_FREE] = OPEN,
        [SB_CLIENT_OPEN] = HELD | ENDING | CLOSING | DOOMED | FREE,
        [SB_CLIENT_HELD] = OPEN | ENDING | CLOSING | DOOMED,
        [SB_CLIENT_ENDING] = HELD | CLOSING | DOOMED,
        [SB_CLIENT_CLOSING] = DOOMED,
        [SB_CLIENT_DOOMED] = FREE,
    };
    sb_client_state from = c->state;
    if (!(allowed[from] & 1u << to))
        sb_error(c->peer.name, "client state %s -> %s is not a transition",
                 sb_client_state_name(from), sb_client_state_name(to));
    int64_t ending_by = 0;
    switch (from) { /* what the state left had */
    case SB_CLIENT_HELD:
        sb_list_remove(&d->round.held, &c->peer);
        sb_bus_disarm(d, &c->peer, SB_TIMER_HELD);
        break;
    case SB_CLIENT_ENDING:
        if (d->mode != SB_MODE_STDIO) {
            ending_by = sb_timers_deadline(&d->timers, sb_bus_timer(d, &c->peer, SB_TIMER_ENDING));
            sb_list_remove(&d->round.ending, &c->peer);
            sb_bus_disarm(d, &c->peer, SB_TIMER_ENDING);
        }
        break;
    case SB_CLIENT_CLOSING:
        sb_bus_disarm(d, &c->peer, SB_TIMER_CLOSING);
        break;
    default:
        break;
    }
    c->state = to;
    switch (to) { /* what the state entered has */
    case SB_CLIENT_FREE:
        return; /* its fds are closed already */
    case SB_CLIENT_OPEN:
        if (from == SB_CLIENT_FREE)
            return; /* sb_clients_open watches its fds */
        break;
    case SB_CLIENT_HELD:
        sb_list_push(&d->round.held, &c->peer);
        /* SB-I-45, SB-I-54: a client is never closed for waiting (issue 32:
         * an id squatted on every worker by others closed the innocent); an
         * ended input's answers are owed until drain_timeout_sec (SB-I-41) */
        if (c->peer.in_eof)
            sb_bus_arm(d, &c->peer, SB_TIMER_HELD, seconds_from_now(d->limits->drain_timeout_sec));
        break;
    case SB_CLIENT_ENDING: /* stdio: the daemon lingers instead (SB-I-5) */
        if (d->mode != SB_MODE_STDIO) {
            sb_list_push(&d->round.ending, &c->peer);
            sb_bus_arm(d, &c->peer, SB_TIMER_ENDING,
                       seconds_from_now(d->limits->drain_timeout_sec));
        }
        if (from == SB_CLIENT_OPEN && !c->peer.blocked_on && d->client_end) /* else lines wait */
            d->client_end(d, c, SB_CLIENT_END_INPUT);
        break;
    case SB_CLIENT_CLOSING: {
        int64_t by = seconds_from_now(d->limits->drain_timeout_sec);
        sb_bus_arm(d, &c->peer, SB_TIMER_CLOSING, ending_by && ending_by < by ? ending_by : by);
        break;
    }
    case SB_CLIENT_DOOMED:
        sb_list_push(&d->round.doomed, &c->peer);
        if (d->client_end) /* SB-X-19 */
            d->client_end(d, c, SB_CLIENT_END_DOOMED);
        break;
    }
    sb_watch_update(d, &c->peer);
}

void sb_client_doom(sb_bus *d, sb_client *c) {
    if (c->state != SB_CLIENT_DOOMED)
        sb_client_enter(d, c, SB_CLIENT_DOOMED);
}
