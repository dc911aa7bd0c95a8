#include "budget.h"
#include "bus.h"
#include "clock.h"

/* Since when c has held output it has not read. The mark is the end of its
 * queue at that moment: once it has read that far, what it holds is newer,
 * and the time starts again. A reader at full speed restarts it with every
 * answer, however deep its queue; one that stalled keeps its first time. */
void sb_budget_note_unread(sb_client *c) {
    if (!sb_outq_len(&c->peer.out)) {
        c->unread_since_ms = 0;
        return;
    }
    if (!c->unread_since_ms || c->peer.out.drained >= c->unread_mark) {
        c->unread_since_ms = sb_now_ms();
        c->unread_mark = c->peer.out.drained + sb_outq_len(&c->peer.out);
    }
}

/* Since when c has held an unfinished line: its bytes arrived and no line
 * was completed since (a slowloris keeps its first time). */
void sb_budget_note_unfinished(sb_client *c, bool moved) {
    if (!sb_frame_pending(&c->peer.in))
        c->unfinished_since_ms = 0;
    else if (moved || !c->unfinished_since_ms)
        c->unfinished_since_ms = sb_now_ms();
}

int64_t sb_budget_holding_since(const sb_client *c) {
    int64_t a = c->unfinished_since_ms, b = c->unread_since_ms;
    return a && b ? (a < b ? a : b) : a ? a : b;
}

/* By guilt, not size: the client that has held bytes it does not move the
 * longest goes first, so one that reads and drains goes only after every
 * one that holds for longer; among clients that hold none, the largest. */
bool sb_budget_closes_before(const sb_client *a, const sb_client *b) {
    int64_t since_a = sb_budget_holding_since(a), since_b = sb_budget_holding_since(b);
    if (since_a && since_b && since_a != since_b)
        return since_a < since_b;
    if (!since_a != !since_b)
        return since_a != 0;
    return a->counted > b->counted;
}
