/* Unit tests for the pending Request table (src/route/pending.c; spec 6.2,
 * 6.3.1, 7.1.2, 7.2, 8.2). Entries are keyed by (receiver, raw id token)
 * and remember the sender and the request's raw sessionId. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bus_limits.h"
#include "pending.h"
#include "status.h"

#define LIT(s) (s), (sizeof(s) - 1)
#define ID(s)  sb_idkey_raw(LIT(s))

static sb_pending t;

static void fini(void) {
    sb_pending_fini(&t);
}

static size_t id_of(int i, char *buf, size_t size) {
    return (size_t)snprintf(buf, size, "%d", i);
}

static int add_nth(int receiver, int sender, int i) {
    char id[32];
    size_t n = id_of(i, id, sizeof id);
    return sb_pending_add(&t, receiver, sender, sb_idkey_raw(id, n), NULL, 0);
}

static int take_nth(int receiver, int i) {
    char id[32];
    size_t n = id_of(i, id, sizeof id);
    return sb_pending_take(&t, receiver, sb_idkey_raw(id, n), NULL, 0);
}

TestSuite(pending, .fini = fini);

/* ---- add / holds / take ----------------------------------------------- */

Test(pending, recorded_request_is_taken_once_for_its_sender) {
    cr_assert_eq(sb_pending_init(&t, 16, 4, 8), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_add(&t, 2, 7, ID("\"req-1\""), NULL, 0), STDIO_BUS_OK);
    cr_assert_eq(t.slots.count, 1);
    cr_assert(sb_pending_holds(&t, 2, ID("\"req-1\"")));
    cr_assert_eq(sb_pending_take(&t, 2, ID("\"req-1\""), NULL, 0), 7);
    cr_assert_eq(t.slots.count, 0);
    cr_assert_not(sb_pending_holds(&t, 2, ID("\"req-1\"")));
    cr_assert_eq(sb_pending_take(&t, 2, ID("\"req-1\""), NULL, 0), STDIO_BUS_ENOTFOUND);
}

Test(pending, the_receiver_is_part_of_the_key) {
    cr_assert_eq(sb_pending_init(&t, 16, 4, 8), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_add(&t, 1, 3, ID("1"), NULL, 0), STDIO_BUS_OK);
    cr_assert_not(sb_pending_holds(&t, 0, ID("1")));
    cr_assert_eq(sb_pending_take(&t, 0, ID("1"), NULL, 0), STDIO_BUS_ENOTFOUND);
    cr_assert_eq(sb_pending_take(&t, 1, ID("1"), NULL, 0), 3);
}

Test(pending, ids_compare_as_raw_tokens) {
    /* "1" and 1 are different ids (pass-through of the raw token). */
    cr_assert_eq(sb_pending_init(&t, 16, 1, 2), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_add(&t, 0, 1, ID("\"1\""), NULL, 0), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_take(&t, 0, ID("1"), NULL, 0), STDIO_BUS_ENOTFOUND);
    cr_assert_eq(sb_pending_take(&t, 0, ID("1.0"), NULL, 0), STDIO_BUS_ENOTFOUND);
    cr_assert_eq(sb_pending_take(&t, 0, ID("\"1\""), NULL, 0), 1);
}

Test(pending, null_id_is_an_ordinary_key) {
    cr_assert_eq(sb_pending_init(&t, 16, 1, 2), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_add(&t, 0, 1, ID("null"), NULL, 0), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_take(&t, 0, ID("null"), NULL, 0), 1);
}

/* ---- duplicate keys: FIFO, or the matching session (SB-I-3) ----------- */

Test(pending, duplicate_keys_are_taken_oldest_first) {
    cr_assert_eq(sb_pending_init(&t, 16, 1, 4), STDIO_BUS_OK);
    for (int sender = 0; sender < 4; sender++)
        cr_assert_eq(sb_pending_add(&t, 0, sender, ID("7"), NULL, 0), STDIO_BUS_OK);
    cr_assert_eq(t.slots.count, 4);
    for (int sender = 0; sender < 4; sender++)
        cr_assert_eq(sb_pending_take(&t, 0, ID("7"), NULL, 0), sender);
    cr_assert_eq(sb_pending_take(&t, 0, ID("7"), NULL, 0), STDIO_BUS_ENOTFOUND);
}

Test(pending, response_session_picks_the_matching_duplicate) {
    cr_assert_eq(sb_pending_init(&t, 16, 1, 4), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_add(&t, 0, 1, ID("7"), LIT("\"sess-a\"")), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_add(&t, 0, 2, ID("7"), LIT("\"sess-b\"")), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_add(&t, 0, 3, ID("7"), LIT("\"sess-b\"")), STDIO_BUS_OK);
    /* The newer entry wins when it carries the response's session... */
    cr_assert_eq(sb_pending_take(&t, 0, ID("7"), LIT("\"sess-b\"")), 2);
    /* ...and among several with that session, the oldest. */
    cr_assert_eq(sb_pending_take(&t, 0, ID("7"), LIT("\"sess-b\"")), 3);
    /* No match left for sess-b: routing by id (6.3.1) takes what is left. */
    cr_assert_eq(sb_pending_take(&t, 0, ID("7"), LIT("\"sess-b\"")), 1);
    cr_assert_eq(t.slots.count, 0);
}

Test(pending, response_without_session_prefers_a_request_without_one) {
    cr_assert_eq(sb_pending_init(&t, 16, 1, 4), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_add(&t, 0, 1, ID("7"), LIT("\"s\"")), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_add(&t, 0, 2, ID("7"), NULL, 0), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_take(&t, 0, ID("7"), NULL, 0), 2);
    /* a worker need not echo the sessionId (SHOULD): it may still answer */
    cr_assert_eq(sb_pending_take(&t, 0, ID("7"), NULL, 0), 1);
}

Test(pending, another_sessions_request_is_the_last_resort) {
    cr_assert_eq(sb_pending_init(&t, 16, 1, 4), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_add(&t, 0, 1, ID("7"), LIT("\"a\"")), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_add(&t, 0, 2, ID("7"), NULL, 0), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_add(&t, 0, 3, ID("7"), LIT("\"b\"")), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_take(&t, 0, ID("7"), LIT("\"b\"")), 3);
    cr_assert_eq(sb_pending_take(&t, 0, ID("7"), LIT("\"zzz\"")), 2);
    cr_assert_eq(sb_pending_take(&t, 0, ID("7"), LIT("\"zzz\"")), 1);
}

Test(pending, orphaned_requests_swallow_their_late_answers) {
    cr_assert_eq(sb_pending_init(&t, 16, 1, 4), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_add(&t, 0, 1, ID("7"), NULL, 0), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_orphan_sender(&t, 1, NULL, NULL), 1);
    cr_assert(sb_pending_holds(&t, 0, ID("7")), "the orphan still holds its id");
    cr_assert_eq(sb_pending_add(&t, 0, 2, ID("7"), NULL, 0), STDIO_BUS_OK);
    /* the worker answers the departed client's request first: nobody gets it */
    cr_assert_eq(sb_pending_take(&t, 0, ID("7"), NULL, 0), SB_PENDING_ORPHAN);
    cr_assert_eq(sb_pending_take(&t, 0, ID("7"), NULL, 0), 2);
    cr_assert_eq(t.slots.count, 0);
    cr_assert_eq(sb_pending_drop_sender(&t, 1, NULL, NULL), 0);
}

Test(pending, oldest_is_by_insertion_even_after_slot_reuse) {
    /* Freed slots are reused LIFO, so slot order is not age order. */
    cr_assert_eq(sb_pending_init(&t, 8, 1, 8), STDIO_BUS_OK);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(add_nth(0, i, i), STDIO_BUS_OK);
    cr_assert_eq(take_nth(0, 1), 1);
    cr_assert_eq(take_nth(0, 3), 3);
    cr_assert_eq(sb_pending_add(&t, 0, 6, ID("x"), NULL, 0), STDIO_BUS_OK); /* slot 3 */
    cr_assert_eq(sb_pending_add(&t, 0, 7, ID("x"), NULL, 0), STDIO_BUS_OK); /* slot 1 */
    cr_assert_eq(sb_pending_take(&t, 0, ID("x"), NULL, 0), 6);
    cr_assert_eq(sb_pending_take(&t, 0, ID("x"), NULL, 0), 7);
}

/* ---- limits ----------------------------------------------------------- */

Test(pending, holds_exactly_max_pending_requests) {
    cr_assert_eq(sb_pending_init(&t, STDIO_BUS_MAX_PENDING_REQUESTS, 4, 4), STDIO_BUS_OK);
    for (int i = 0; i < STDIO_BUS_MAX_PENDING_REQUESTS; i++)
        cr_assert_eq(add_nth(i % 4, i % 4, i), STDIO_BUS_OK, "request %d refused", i);
    cr_assert_eq(t.slots.count, STDIO_BUS_MAX_PENDING_REQUESTS);
    cr_assert_eq(add_nth(0, 0, STDIO_BUS_MAX_PENDING_REQUESTS), STDIO_BUS_EFULL);
    cr_assert_eq(t.slots.count, STDIO_BUS_MAX_PENDING_REQUESTS);
    for (int i = 0; i < STDIO_BUS_MAX_PENDING_REQUESTS; i++) {
        char id[16];
        size_t n = id_of(i, id, sizeof id);
        cr_assert(sb_pending_holds(&t, i % 4, sb_idkey_raw(id, n)), "request %d lost", i);
    }
    cr_assert_eq(take_nth(1, 1001), 1);
    cr_assert_eq(add_nth(0, 0, STDIO_BUS_MAX_PENDING_REQUESTS), STDIO_BUS_OK);
    cr_assert_eq(add_nth(0, 0, STDIO_BUS_MAX_PENDING_REQUESTS + 1), STDIO_BUS_EFULL);
    for (int i = 0; i < STDIO_BUS_MAX_PENDING_REQUESTS; i++)
        if (i != 1001)
            cr_assert_eq(take_nth(i % 4, i), i % 4, "request %d lost", i);
}

/* Builds a raw string token whose value has n characters. */
static size_t string_token(char *buf, size_t n) {
    buf[0] = '"';
    memset(buf + 1, 'i', n);
    buf[n + 1] = '"';
    return n + 2;
}

Test(pending, id_at_max_request_id_len_fits_one_over_is_einval) {
    char id[STDIO_BUS_MAX_REQUEST_ID_LEN + 8];
    cr_assert_eq(sb_pending_init(&t, 4, 1, 1), STDIO_BUS_OK);
    size_t n = string_token(id, STDIO_BUS_MAX_REQUEST_ID_LEN);
    cr_assert_eq(sb_pending_add(&t, 0, 0, sb_idkey_raw(id, n), NULL, 0), STDIO_BUS_OK);
    cr_assert(sb_pending_holds(&t, 0, sb_idkey_raw(id, n)));
    n = string_token(id, STDIO_BUS_MAX_REQUEST_ID_LEN + 1);
    cr_assert_eq(sb_pending_add(&t, 0, 0, sb_idkey_raw(id, n), NULL, 0), STDIO_BUS_EINVAL);
    cr_assert_eq(t.slots.count, 1);
}

Test(pending, session_at_max_session_id_len_fits_one_over_is_einval) {
    char session[STDIO_BUS_MAX_SESSION_ID_LEN + 8];
    cr_assert_eq(sb_pending_init(&t, 4, 1, 2), STDIO_BUS_OK);
    size_t n = string_token(session, STDIO_BUS_MAX_SESSION_ID_LEN);
    cr_assert_eq(sb_pending_add(&t, 0, 0, ID("1"), session, n), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_add(&t, 0, 1, ID("1"), LIT("\"other\"")), STDIO_BUS_OK);
    /* The full-length session is stored whole: it still selects its entry. */
    cr_assert_eq(sb_pending_take(&t, 0, ID("1"), LIT("\"other\"")), 1);
    n = string_token(session, STDIO_BUS_MAX_SESSION_ID_LEN + 1);
    cr_assert_eq(sb_pending_add(&t, 0, 0, ID("2"), session, n), STDIO_BUS_EINVAL);
    cr_assert_eq(t.slots.count, 1);
}

Test(pending, empty_id_is_einval) {
    cr_assert_eq(sb_pending_init(&t, 4, 1, 1), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_add(&t, 0, 0, sb_idkey_raw("", 0), NULL, 0), STDIO_BUS_EINVAL);
    cr_assert_eq(t.slots.count, 0);
}

/* ---- drop by receiver / sender (7.1.2, 7.2) --------------------------- */

typedef struct {
    int calls;
    int receiver, sender; /* expected, -1 = any */
    bool bad;
} visits;

static void count_visit(void *ctx, const sb_request *r) {
    visits *v = ctx;
    v->calls++;
    if ((v->receiver >= 0 && r->receiver != v->receiver) ||
        (v->sender >= 0 && r->sender != v->sender) || r->id_len == 0)
        v->bad = true;
}

Test(pending, drop_receiver_discards_exactly_its_requests) {
    cr_assert_eq(sb_pending_init(&t, 64, 3, 5), STDIO_BUS_OK);
    for (int i = 0; i < 30; i++)
        cr_assert_eq(add_nth(i % 3, i % 5, i), STDIO_BUS_OK);
    visits v = {0, 2, -1, false};
    cr_assert_eq(sb_pending_drop_receiver(&t, 2, count_visit, &v), 10);
    cr_assert_eq(v.calls, 10);
    cr_assert_not(v.bad, "visited another receiver's request");
    cr_assert_eq(t.slots.count, 20);
    for (int i = 0; i < 30; i++)
        cr_assert_eq(take_nth(i % 3, i) >= 0, i % 3 != 2, "request %d", i);
}

Test(pending, drop_sender_discards_exactly_its_requests) {
    cr_assert_eq(sb_pending_init(&t, 64, 3, 5), STDIO_BUS_OK);
    for (int i = 0; i < 30; i++)
        cr_assert_eq(add_nth(i % 3, i % 5, i), STDIO_BUS_OK);
    visits v = {0, -1, 0, false};
    cr_assert_eq(sb_pending_drop_sender(&t, 0, count_visit, &v), 6);
    cr_assert_eq(v.calls, 6);
    cr_assert_not(v.bad, "visited another sender's request");
    cr_assert_eq(t.slots.count, 24);
    for (int i = 0; i < 30; i++)
        cr_assert_eq(take_nth(i % 3, i), i % 5 == 0 ? STDIO_BUS_ENOTFOUND : i % 5, "request %d", i);
    cr_assert_eq(sb_pending_drop_sender(&t, 0, NULL, NULL), 0);
}

Test(pending, drop_after_takes_keeps_lists_consistent) {
    cr_assert_eq(sb_pending_init(&t, 16, 2, 2), STDIO_BUS_OK);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(add_nth(0, i % 2, i), STDIO_BUS_OK);
    cr_assert_eq(take_nth(0, 0), 0); /* list tail */
    cr_assert_eq(take_nth(0, 7), 1); /* list head */
    cr_assert_eq(take_nth(0, 4), 0); /* middle */
    visits v = {0, 0, -1, false};
    cr_assert_eq(sb_pending_drop_receiver(&t, 0, count_visit, &v), 5);
    cr_assert_eq(v.calls, 5);
    cr_assert_eq(t.slots.count, 0);
    cr_assert_eq(sb_pending_drop_sender(&t, 0, NULL, NULL), 0);
    cr_assert_eq(sb_pending_drop_sender(&t, 1, NULL, NULL), 0);
}

/* ---- a reference model over many operations --------------------------- */

static uint32_t rng_state = 88172645u;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state % n;
}

#define MODEL_CAP       128
#define MODEL_RECEIVERS 3
#define MODEL_SENDERS   4
#define MODEL_IDS       24 /* few ids: many duplicate keys */
#define MODEL_SESSIONS  3  /* session index, MODEL_SESSIONS = none */

typedef struct {
    int receiver, sender, id, session;
    uint64_t seq;
} model_entry;

static model_entry model[MODEL_CAP];
static int model_count;

static size_t session_of(int s, char *buf, size_t size) {
    if (s == MODEL_SESSIONS)
        return 0;
    return (size_t)snprintf(buf, size, "\"sess-%d\"", s);
}

/* The reference choice (SB-I-3): the oldest entry with the response's
 * session, else the oldest without a session, else the oldest of any. */
static int model_take(int receiver, int id, int session) {
    int best[3] = {-1, -1, -1};
    for (int i = 0; i < model_count; i++) {
        const model_entry *e = &model[i];
        if (e->receiver != receiver || e->id != id)
            continue;
        int rank;
        if (session != MODEL_SESSIONS && e->session == session)
            rank = 0;
        else if (e->session == MODEL_SESSIONS)
            rank = 1;
        else
            rank = 2;
        if (best[rank] < 0 || e->seq < model[best[rank]].seq)
            best[rank] = i;
    }
    int chosen = best[0] >= 0 ? best[0] : best[1] >= 0 ? best[1] : best[2];
    if (chosen < 0)
        return STDIO_BUS_ENOTFOUND;
    int sender = model[chosen].sender;
    model[chosen] = model[--model_count];
    return sender;
}

static int model_drop(bool by_receiver, int who) {
    int dropped = 0;
    for (int i = 0; i < model_count;) {
        if ((by_receiver ? model[i].receiver : model[i].sender) == who) {
            model[i] = model[--model_count];
            dropped++;
        } else {
            i++;
        }
    }
    return dropped;
}

Test(pending, slots_are_reused_over_100k_operations_against_a_model) {
    cr_assert_eq(sb_pending_init(&t, MODEL_CAP, MODEL_RECEIVERS, MODEL_SENDERS), STDIO_BUS_OK);
    uint64_t seq = 0;
    for (int op = 0; op < 100000; op++) {
        int receiver = (int)rnd(MODEL_RECEIVERS), id = (int)rnd(MODEL_IDS);
        int session = (int)rnd(MODEL_SESSIONS + 1);
        char idbuf[16], sbuf[32];
        size_t id_len = id_of(id, idbuf, sizeof idbuf);
        size_t s_len = session_of(session, sbuf, sizeof sbuf);
        const char *s_ptr = s_len ? sbuf : NULL;
        uint32_t what = rnd(100);
        if (what < 50) {
            int sender = (int)rnd(MODEL_SENDERS);
            int rc =
                sb_pending_add(&t, receiver, sender, sb_idkey_raw(idbuf, id_len), s_ptr, s_len);
            if (model_count < MODEL_CAP) {
                cr_assert_eq(rc, STDIO_BUS_OK, "op %d", op);
                model[model_count++] = (model_entry){receiver, sender, id, session, seq++};
            } else {
                cr_assert_eq(rc, STDIO_BUS_EFULL, "op %d", op);
            }
        } else if (what < 90) {
            bool held = false;
            for (int i = 0; i < model_count; i++)
                held |= model[i].receiver == receiver && model[i].id == id;
            cr_assert_eq(sb_pending_holds(&t, receiver, sb_idkey_raw(idbuf, id_len)), held, "op %d",
                         op);
            int expected = model_take(receiver, id, session);
            cr_assert_eq(sb_pending_take(&t, receiver, sb_idkey_raw(idbuf, id_len), s_ptr, s_len),
                         expected, "op %d: receiver %d id %d session %d", op, receiver, id,
                         session);
        } else if (what < 95) {
            int expected = model_drop(true, receiver);
            cr_assert_eq(sb_pending_drop_receiver(&t, receiver, NULL, NULL), expected, "op %d", op);
        } else {
            int sender = (int)rnd(MODEL_SENDERS);
            int expected = model_drop(false, sender);
            cr_assert_eq(sb_pending_drop_sender(&t, sender, NULL, NULL), expected, "op %d", op);
        }
        cr_assert_eq(t.slots.count, model_count, "op %d", op);
    }
    int total = 0;
    for (int s = 0; s < MODEL_SENDERS; s++)
        total += sb_pending_drop_sender(&t, s, NULL, NULL);
    cr_assert_eq(total, model_count);
    cr_assert_eq(t.slots.count, 0);
}

/* ---- counts per receiver and per sender (fair shares, SB-I-51, SB-I-52) -- */

Test(pending, counts_follow_adds_takes_orphans_and_drops) {
    cr_assert_eq(sb_pending_init(&t, 16, 4, 8), STDIO_BUS_OK);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(add_nth(i % 2, 3, i), STDIO_BUS_OK);
    cr_assert_eq(add_nth(1, 4, 9), STDIO_BUS_OK);
    cr_assert_eq(sb_pending_count_sender(&t, 3), 5);
    cr_assert_eq(sb_pending_count_sender(&t, 4), 1);
    cr_assert_eq(sb_pending_count_receiver(&t, 0), 3);
    cr_assert_eq(sb_pending_count_receiver(&t, 1), 3);
    cr_assert_eq(take_nth(0, 0), 3);
    cr_assert_eq(sb_pending_count_sender(&t, 3), 4);
    cr_assert_eq(sb_pending_count_receiver(&t, 0), 2);
    /* an orphan belongs to no sender, but stays with its receiver */
    cr_assert_eq(sb_pending_orphan_sender(&t, 3, NULL, NULL), 4);
    cr_assert_eq(sb_pending_count_sender(&t, 3), 0);
    cr_assert_eq(sb_pending_count_receiver(&t, 1), 3);
    cr_assert_eq(take_nth(1, 1), SB_PENDING_ORPHAN);
    cr_assert_eq(sb_pending_count_receiver(&t, 1), 2);
    cr_assert_eq(sb_pending_drop_receiver(&t, 1, NULL, NULL), 2);
    cr_assert_eq(sb_pending_count_receiver(&t, 1), 0);
    cr_assert_eq(sb_pending_count_sender(&t, 4), 0);
}
