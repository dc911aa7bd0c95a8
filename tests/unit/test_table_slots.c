/* The lazily handed-out entries of the pending and session tables
 * (src/route/pending.c, src/route/sessions.c; ecc32bb) against the general path they
 * replaced: a free list that held every entry from the start (entry 0 on
 * top), so that a table touches only the pages traffic reaches. The
 * shortcut keeps two sources, the returned entries and a high-water mark
 * of never-used ones, and must hand out the very slot the single free list
 * would: returned slots first, last in first out, then never-used ones from
 * 0 up, and exactly `capacity` of them (spec 8.2: the hard limits, and no
 * more).
 *
 * Every sequence of adds and removes of up to SEQ_LEN steps on tables of 1
 * to MAX_CAPACITY entries is run on the table and on the reference, near
 * the boundaries where the two sources meet: the high-water mark at the
 * capacity, the free list empty or not. After each step both hold the same
 * entries in the same slots, and each live key is found. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "idkey.h"
#include "pending.h"
#include "sessions.h"
#include "status.h"

#define MAX_CAPACITY 4
#define SEQ_LEN      8
#define OPS          3 /* add; remove the oldest live entry; remove the newest */

/* The general path: one free list of every slot, slot 0 on top. */
typedef struct {
    int stack[MAX_CAPACITY];
    int top;
} ref_slots;

static void ref_init(ref_slots *r, int capacity) {
    r->top = 0;
    for (int i = capacity - 1; i >= 0; i--)
        r->stack[r->top++] = i;
}

/* The slot an add takes, or -1 when the table is full. */
static int ref_take(ref_slots *r) {
    return r->top > 0 ? r->stack[--r->top] : -1;
}

static void ref_give(ref_slots *r, int slot) {
    r->stack[r->top++] = slot;
}

/* A live entry: its key number and the slot it sits in. */
typedef struct {
    int key;
    int slot;
} live_entry;

/* The steps so far, for messages: "A" add, "o" remove oldest, "n" newest. */
static const char *steps_text(const int *ops, int n) {
    static char buf[SEQ_LEN + 1];
    for (int i = 0; i < n; i++)
        buf[i] = "Aon"[ops[i]];
    buf[n] = '\0';
    return buf;
}

/* Fills ops with sequence number seq of length SEQ_LEN (base OPS). */
static void decode(long seq, int *ops) {
    for (int i = 0; i < SEQ_LEN; i++, seq /= OPS)
        ops[i] = (int)(seq % OPS);
}

static long sequences(void) {
    long n = 1;
    for (int i = 0; i < SEQ_LEN; i++)
        n *= OPS;
    return n;
}

/* ---- pending ----------------------------------------------------------- */

static size_t pending_key(int k, char *buf) {
    return (size_t)snprintf(buf, 16, "\"r%d\"", k);
}

/* The slot of the entry holding request id k. */
static int pending_slot(const sb_pending *t, int k) {
    char id[16];
    size_t n = pending_key(k, id);
    for (int i = 0; i < t->slots.capacity; i++) {
        const sb_request *r = &((const sb_request *)t->slots.entries)[i];
        if (r->id_len == n && memcmp(r->id, id, n) == 0)
            return i;
    }
    return -1;
}

Test(pending, entries_are_handed_out_as_from_a_free_list_of_every_entry) {
    for (int capacity = 1; capacity <= MAX_CAPACITY; capacity++) {
        for (long seq = 0; seq < sequences(); seq++) {
            int ops[SEQ_LEN], next_key = 0, n_live = 0;
            live_entry live[MAX_CAPACITY + 1];
            sb_pending t;
            ref_slots ref;
            char id[16];

            decode(seq, ops);
            cr_assert_eq(sb_pending_init(&t, capacity, 1, 1), STDIO_BUS_OK);
            ref_init(&ref, capacity);
            for (int s = 0; s < SEQ_LEN; s++) {
                const char *done = steps_text(ops, s + 1);
                if (ops[s] == 0) {
                    int k = next_key++;
                    int want = ref_take(&ref);
                    int rc =
                        sb_pending_add(&t, 0, 0, sb_idkey_raw(id, pending_key(k, id)), NULL, 0);
                    cr_assert_eq(rc, want < 0 ? STDIO_BUS_EFULL : STDIO_BUS_OK,
                                 "capacity %d, steps %s: the add returned %d with %d entries in "
                                 "use; a free list of every entry %s",
                                 capacity, done, rc, n_live, want < 0 ? "is full" : "has room");
                    if (want < 0)
                        continue;
                    int got = pending_slot(&t, k);
                    cr_assert_eq(got, want,
                                 "capacity %d, steps %s: the add took slot %d, a free list of "
                                 "every entry gives slot %d",
                                 capacity, done, got, want);
                    live[n_live++] = (live_entry){k, got};
                } else if (n_live > 0) {
                    int at = ops[s] == 1 ? 0 : n_live - 1;
                    int k = live[at].key;
                    int rc = sb_pending_take(&t, 0, sb_idkey_raw(id, pending_key(k, id)), NULL, 0);
                    cr_assert_eq(rc, 0, "capacity %d, steps %s: request r%d not taken (%d)",
                                 capacity, done, k, rc);
                    ref_give(&ref, live[at].slot);
                    memmove(live + at, live + at + 1, (size_t)(n_live - at - 1) * sizeof *live);
                    n_live--;
                }
                cr_assert_eq(t.slots.count, n_live,
                             "capacity %d, steps %s: %d entries, expected %d", capacity, done,
                             t.slots.count, n_live);
                for (int i = 0; i < n_live; i++)
                    cr_assert(
                        sb_pending_holds(&t, 0, sb_idkey_raw(id, pending_key(live[i].key, id))),
                        "capacity %d, steps %s: request r%d lost", capacity, done, live[i].key);
            }
            sb_pending_fini(&t);
        }
    }
}

/* ---- sessions ---------------------------------------------------------- */

static size_t session_key(int k, char *buf) {
    return (size_t)snprintf(buf, 16, "\"s%d\"", k);
}

Test(sessions, entries_are_handed_out_as_from_a_free_list_of_every_entry) {
    for (int capacity = 1; capacity <= MAX_CAPACITY; capacity++) {
        for (long seq = 0; seq < sequences(); seq++) {
            int ops[SEQ_LEN], next_key = 0, n_live = 0;
            live_entry live[MAX_CAPACITY + 1];
            sb_sessions t;
            ref_slots ref;
            char key[16];

            decode(seq, ops);
            cr_assert_eq(sb_sessions_init(&t, capacity, 1, 1), STDIO_BUS_OK);
            ref_init(&ref, capacity);
            for (int s = 0; s < SEQ_LEN; s++) {
                const char *done = steps_text(ops, s + 1);
                if (ops[s] == 0) {
                    int k = next_key++;
                    int want = ref_take(&ref);
                    sb_session *e = sb_sessions_add(&t, key, session_key(k, key), 0, 0);
                    cr_assert_eq(e != NULL, want >= 0,
                                 "capacity %d, steps %s: the add %s with %d entries in use; a "
                                 "free list of every entry %s",
                                 capacity, done, e != NULL ? "succeeded" : "failed", n_live,
                                 want < 0 ? "is full" : "has room");
                    if (want < 0)
                        continue;
                    int got = sb_slots_index(&t.slots, e);
                    cr_assert_eq(got, want,
                                 "capacity %d, steps %s: the add took slot %d, a free list of "
                                 "every entry gives slot %d",
                                 capacity, done, got, want);
                    live[n_live++] = (live_entry){k, got};
                } else if (n_live > 0) {
                    int at = ops[s] == 1 ? 0 : n_live - 1;
                    sb_session *e = sb_sessions_find(&t, key, session_key(live[at].key, key));
                    cr_assert_not_null(e, "capacity %d, steps %s: session s%d not found", capacity,
                                       done, live[at].key);
                    sb_sessions_remove(&t, e);
                    ref_give(&ref, live[at].slot);
                    memmove(live + at, live + at + 1, (size_t)(n_live - at - 1) * sizeof *live);
                    n_live--;
                }
                cr_assert_eq(t.slots.count, n_live,
                             "capacity %d, steps %s: %d entries, expected %d", capacity, done,
                             t.slots.count, n_live);
                for (int i = 0; i < n_live; i++) {
                    sb_session *e = sb_sessions_find(&t, key, session_key(live[i].key, key));
                    cr_assert(e != NULL && sb_slots_index(&t.slots, e) == live[i].slot,
                              "capacity %d, steps %s: session s%d lost or moved", capacity, done,
                              live[i].key);
                }
            }
            sb_sessions_fini(&t);
        }
    }
}
