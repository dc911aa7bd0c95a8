/* Unit tests for the Session table (src/route/sessions.c; spec 3.4, 6.1, 8.2).
 * Keys are raw JSON tokens, quotes included. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bus_limits.h"
#include "sessions.h"
#include "status.h"

#define LIT(s) (s), (sizeof(s) - 1)

static sb_sessions t;

static void fini(void) {
    sb_sessions_fini(&t);
}

/* Formats the raw token of session i: "s-<i>" with its quotes. */
static size_t key_of(int i, char *buf, size_t size) {
    return (size_t)snprintf(buf, size, "\"s-%d\"", i);
}

static sb_session *add_nth(int i, int worker, int client) {
    char key[32];
    size_t n = key_of(i, key, sizeof key);
    return sb_sessions_add(&t, key, n, worker, client);
}

static sb_session *find_nth(int i) {
    char key[32];
    size_t n = key_of(i, key, sizeof key);
    return sb_sessions_find(&t, key, n);
}

TestSuite(sessions, .fini = fini);

/* ---- add / find / remove ---------------------------------------------- */

Test(sessions, added_session_is_found_with_its_worker_and_owner) {
    cr_assert_eq(sb_sessions_init(&t, 16, 4, 8), STDIO_BUS_OK);
    sb_session *s = sb_sessions_add(&t, LIT("\"abc\""), 2, 5);
    cr_assert_not_null(s);
    cr_assert_eq(t.slots.count, 1);
    sb_session *found = sb_sessions_find(&t, LIT("\"abc\""));
    cr_assert_eq(found, s);
    cr_assert_eq(found->worker, 2);
    cr_assert_eq(found->client, 5);
    cr_assert_eq(found->key_len, 5);
    cr_assert(memcmp(found->key, "\"abc\"", 5) == 0);
}

Test(sessions, unknown_key_is_not_found) {
    cr_assert_eq(sb_sessions_init(&t, 16, 4, 8), STDIO_BUS_OK);
    cr_assert_null(sb_sessions_find(&t, LIT("\"abc\"")));
    cr_assert_not_null(sb_sessions_add(&t, LIT("\"abc\""), 0, 0));
    cr_assert_null(sb_sessions_find(&t, LIT("\"ab\"")));
    cr_assert_null(sb_sessions_find(&t, LIT("\"abcd\"")));
    cr_assert_null(sb_sessions_find(&t, LIT("\"ABC\"")));
}

Test(sessions, keys_compare_as_raw_tokens) {
    /* The escaped spelling of "a" is a different raw token (pass-through:
     * the daemon compares bytes, it does not decode). */
    cr_assert_eq(sb_sessions_init(&t, 16, 1, 1), STDIO_BUS_OK);
    cr_assert_not_null(sb_sessions_add(&t, LIT("\"a\""), 0, 0));
    cr_assert_null(sb_sessions_find(&t, LIT("\"\\u0061\"")));
    cr_assert_null(sb_sessions_find(&t, LIT("a")));
}

Test(sessions, removed_session_is_gone_and_others_stay) {
    cr_assert_eq(sb_sessions_init(&t, 16, 2, 2), STDIO_BUS_OK);
    for (int i = 0; i < 10; i++)
        cr_assert_not_null(add_nth(i, i % 2, i % 2));
    sb_sessions_remove(&t, find_nth(4));
    cr_assert_eq(t.slots.count, 9);
    cr_assert_null(find_nth(4));
    for (int i = 0; i < 10; i++)
        if (i != 4)
            cr_assert_not_null(find_nth(i), "session %d lost", i);
}

Test(sessions, colliding_keys_share_a_bucket_correctly) {
    /* White box: a bucket mask of 0 chains every key in one bucket, so
     * removing from the head, middle and tail of a chain is exercised. */
    cr_assert_eq(sb_sessions_init(&t, 16, 1, 1), STDIO_BUS_OK);
    t.slots.bucket_mask = 0;
    for (int i = 0; i < 16; i++)
        cr_assert_not_null(add_nth(i, 0, 0));
    for (int i = 0; i < 16; i += 3)
        sb_sessions_remove(&t, find_nth(i));
    for (int i = 0; i < 16; i++)
        cr_assert_eq(find_nth(i) != NULL, i % 3 != 0, "session %d", i);
}

/* ---- limits ----------------------------------------------------------- */

Test(sessions, holds_exactly_max_sessions) {
    cr_assert_eq(sb_sessions_init(&t, STDIO_BUS_MAX_SESSIONS, 4, 4), STDIO_BUS_OK);
    for (int i = 0; i < STDIO_BUS_MAX_SESSIONS; i++)
        cr_assert_not_null(add_nth(i, i % 4, i % 4), "session %d refused", i);
    cr_assert_eq(t.slots.count, STDIO_BUS_MAX_SESSIONS);
    cr_assert_null(add_nth(STDIO_BUS_MAX_SESSIONS, 0, 0), "table over STDIO_BUS_MAX_SESSIONS");
    cr_assert_eq(t.slots.count, STDIO_BUS_MAX_SESSIONS);
    for (int i = 0; i < STDIO_BUS_MAX_SESSIONS; i++)
        cr_assert_not_null(find_nth(i), "session %d lost", i);

    /* One removed: exactly one more fits. */
    sb_sessions_remove(&t, find_nth(500));
    cr_assert_not_null(add_nth(STDIO_BUS_MAX_SESSIONS, 1, 1));
    cr_assert_null(add_nth(STDIO_BUS_MAX_SESSIONS + 1, 1, 1));
}

Test(sessions, key_at_max_session_id_len_fits_one_over_does_not) {
    /* The limit counts the string's characters; the raw token adds quotes. */
    char key[STDIO_BUS_MAX_SESSION_ID_LEN + 8];
    cr_assert_eq(sb_sessions_init(&t, 4, 1, 1), STDIO_BUS_OK);
    key[0] = '"';
    memset(key + 1, 'k', STDIO_BUS_MAX_SESSION_ID_LEN);
    key[STDIO_BUS_MAX_SESSION_ID_LEN + 1] = '"';
    size_t at_limit = STDIO_BUS_MAX_SESSION_ID_LEN + 2;
    cr_assert_not_null(sb_sessions_add(&t, key, at_limit, 0, 0));
    cr_assert_not_null(sb_sessions_find(&t, key, at_limit));

    key[STDIO_BUS_MAX_SESSION_ID_LEN + 1] = 'k';
    key[STDIO_BUS_MAX_SESSION_ID_LEN + 2] = '"';
    cr_assert_null(sb_sessions_add(&t, key, at_limit + 1, 0, 0));
    cr_assert_eq(t.slots.count, 1);
}

Test(sessions, empty_key_is_refused) {
    cr_assert_eq(sb_sessions_init(&t, 4, 1, 1), STDIO_BUS_OK);
    cr_assert_null(sb_sessions_add(&t, "", 0, 0, 0));
    cr_assert_eq(t.slots.count, 0);
}

/* ---- invalidation (SB-3.4-4, SB-3.4-5) -------------------------------- */

typedef struct {
    int calls;
    int worker, client; /* expected owner, -1 = any */
    bool bad;
} visits;

static void count_visit(void *ctx, const sb_session *s) {
    visits *v = ctx;
    v->calls++;
    if ((v->worker >= 0 && s->worker != v->worker) || (v->client >= 0 && s->client != v->client) ||
        s->key_len == 0)
        v->bad = true;
}

Test(sessions, drop_worker_removes_exactly_its_sessions) {
    cr_assert_eq(sb_sessions_init(&t, 64, 3, 5), STDIO_BUS_OK);
    for (int i = 0; i < 30; i++)
        cr_assert_not_null(add_nth(i, i % 3, i % 5));
    visits v = {0, 1, -1, false};
    cr_assert_eq(sb_sessions_drop_worker(&t, 1, count_visit, &v), 10);
    cr_assert_eq(v.calls, 10);
    cr_assert_not(v.bad, "visited a session of another worker");
    cr_assert_eq(t.slots.count, 20);
    for (int i = 0; i < 30; i++)
        cr_assert_eq(find_nth(i) != NULL, i % 3 != 1, "session %d", i);
    /* Nothing left for worker 1: a second drop is a no-op. */
    cr_assert_eq(sb_sessions_drop_worker(&t, 1, NULL, NULL), 0);
}

Test(sessions, drop_client_removes_exactly_its_sessions) {
    cr_assert_eq(sb_sessions_init(&t, 64, 3, 5), STDIO_BUS_OK);
    for (int i = 0; i < 30; i++)
        cr_assert_not_null(add_nth(i, i % 3, i % 5));
    visits v = {0, -1, 4, false};
    cr_assert_eq(sb_sessions_drop_client(&t, 4, count_visit, &v), 6);
    cr_assert_eq(v.calls, 6);
    cr_assert_not(v.bad, "visited a session of another client");
    cr_assert_eq(t.slots.count, 24);
    for (int i = 0; i < 30; i++)
        cr_assert_eq(find_nth(i) != NULL, i % 5 != 4, "session %d", i);
}

Test(sessions, drop_after_individual_removes_keeps_lists_consistent) {
    /* Removing the head, the tail and a middle entry of a worker's list by
     * hand must leave drop_worker visiting exactly the survivors. */
    cr_assert_eq(sb_sessions_init(&t, 16, 2, 2), STDIO_BUS_OK);
    for (int i = 0; i < 6; i++)
        cr_assert_not_null(add_nth(i, 0, i % 2));
    sb_sessions_remove(&t, find_nth(0)); /* list tail (pushed first) */
    sb_sessions_remove(&t, find_nth(5)); /* list head */
    sb_sessions_remove(&t, find_nth(2)); /* middle */
    visits v = {0, 0, -1, false};
    cr_assert_eq(sb_sessions_drop_worker(&t, 0, count_visit, &v), 3);
    cr_assert_eq(v.calls, 3);
    cr_assert_eq(t.slots.count, 0);
    cr_assert_eq(sb_sessions_drop_client(&t, 0, NULL, NULL), 0);
    cr_assert_eq(sb_sessions_drop_client(&t, 1, NULL, NULL), 0);
}

/* ---- a reference model over many operations --------------------------- */

/* xorshift32: deterministic, so a failure reproduces. */
static uint32_t rng_state = 2463534242u;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state % n;
}

#define MODEL_KEYS    600
#define MODEL_CAP     256
#define MODEL_WORKERS 4
#define MODEL_CLIENTS 6

typedef struct {
    bool present;
    int worker, client;
} model_entry;

static model_entry model[MODEL_KEYS];
static int model_count;

static void model_drop(bool by_worker, int who) {
    for (int k = 0; k < MODEL_KEYS; k++)
        if (model[k].present && (by_worker ? model[k].worker : model[k].client) == who) {
            model[k].present = false;
            model_count--;
        }
}

Test(sessions, slots_are_reused_over_100k_operations_against_a_model) {
    cr_assert_eq(sb_sessions_init(&t, MODEL_CAP, MODEL_WORKERS, MODEL_CLIENTS), STDIO_BUS_OK);
    for (int op = 0; op < 100000; op++) {
        int k = (int)rnd(MODEL_KEYS);
        uint32_t what = rnd(100);
        if (what < 50) {
            if (model[k].present)
                continue; /* the contract: the key must not be present */
            int w = (int)rnd(MODEL_WORKERS), c = (int)rnd(MODEL_CLIENTS);
            sb_session *s = add_nth(k, w, c);
            if (model_count < MODEL_CAP) {
                cr_assert_not_null(s, "op %d: add refused with %d of %d", op, model_count,
                                   MODEL_CAP);
                model[k] = (model_entry){true, w, c};
                model_count++;
            } else {
                cr_assert_null(s, "op %d: add over capacity", op);
            }
        } else if (what < 90) {
            sb_session *s = find_nth(k);
            cr_assert_eq(s != NULL, model[k].present, "op %d: key %d", op, k);
            if (s) {
                cr_assert_eq(s->worker, model[k].worker, "op %d", op);
                cr_assert_eq(s->client, model[k].client, "op %d", op);
                if (what < 75) {
                    sb_sessions_remove(&t, s);
                    model[k].present = false;
                    model_count--;
                }
            }
        } else if (what < 95) {
            int w = (int)rnd(MODEL_WORKERS);
            int before = model_count;
            model_drop(true, w);
            cr_assert_eq(sb_sessions_drop_worker(&t, w, NULL, NULL), before - model_count, "op %d",
                         op);
        } else {
            int c = (int)rnd(MODEL_CLIENTS);
            int before = model_count;
            model_drop(false, c);
            cr_assert_eq(sb_sessions_drop_client(&t, c, NULL, NULL), before - model_count, "op %d",
                         op);
        }
        cr_assert_eq(t.slots.count, model_count, "op %d", op);
    }
    /* Every key agrees at the end, and the table is still whole. */
    for (int k = 0; k < MODEL_KEYS; k++)
        cr_assert_eq(find_nth(k) != NULL, model[k].present, "key %d", k);
    int total = 0;
    for (int w = 0; w < MODEL_WORKERS; w++)
        total += sb_sessions_drop_worker(&t, w, NULL, NULL);
    cr_assert_eq(total, model_count);
    cr_assert_eq(t.slots.count, 0);
}
