/* The slot table (src/base/slots.h, slots.c) both hashed tables stand on: entries
 * handed out and returned, bucket chains, the owner lists of each side and
 * their counts. The tables' own tests (test_sessions.c, test_pending.c,
 * test_table_slots.c) judge it through them; these judge it alone. */
#include <criterion/criterion.h>

#include "slots.h"
#include "status.h"

typedef struct {
    int owner[SB_SLOT_SIDES];
    int value;
} entry;

static sb_slots t;

static entry *at(int32_t i) {
    return &((entry *)t.entries)[i];
}

static int32_t add(uint32_t hash, int owner0, int owner1, int value) {
    int32_t i = sb_slots_take(&t, hash, owner0, owner1);
    if (i != SB_SLOT_NIL)
        *at(i) = (entry){{owner0, owner1}, value};
    return i;
}

static void drop(int32_t i) {
    sb_slots_release(&t, i, at(i)->owner[0], at(i)->owner[1]);
}

/* The values listed under an owner, newest first, into out; their number. */
static int listed(int side, int owner, int *out) {
    int n = 0;
    for (int32_t i = sb_slots_first(&t, side, owner); i != SB_SLOT_NIL;
         i = sb_slots_link(&t, i)->next[side])
        out[n++] = at(i)->value;
    return n;
}

static int in_bucket(uint32_t hash, int value) {
    for (int32_t i = sb_slots_bucket(&t, hash); i != SB_SLOT_NIL;
         i = sb_slots_link(&t, i)->next_in_bucket)
        if (sb_slots_link(&t, i)->hash == hash && at(i)->value == value)
            return 1;
    return 0;
}

static void teardown(void) {
    sb_slots_fini(&t);
}

TestSuite(slots, .fini = teardown);

Test(slots, holds_exactly_its_capacity_and_hands_out_returned_entries_first) {
    cr_assert_eq(sb_slots_init(&t, sizeof(entry), 3, 1, 1), STDIO_BUS_OK);
    cr_assert_eq(add(1, 0, 0, 10), 0);
    cr_assert_eq(add(2, 0, 0, 11), 1);
    cr_assert_eq(add(3, 0, 0, 12), 2);
    cr_assert_eq(add(4, 0, 0, 13), SB_SLOT_NIL, "a fourth entry in a table of three");
    cr_assert_eq(t.count, 3);
    drop(0);
    drop(2);
    cr_assert_eq(t.count, 1);
    cr_assert_eq(add(5, 0, 0, 14), 2, "the last returned entry first");
    cr_assert_eq(add(6, 0, 0, 15), 0);
    cr_assert_eq(add(7, 0, 0, 16), SB_SLOT_NIL);
}

Test(slots, an_entry_is_found_in_its_bucket_until_released) {
    cr_assert_eq(sb_slots_init(&t, sizeof(entry), 16, 1, 1), STDIO_BUS_OK);
    t.bucket_mask = 0; /* white box: one chain, so head, middle and tail removals happen */
    for (int v = 0; v < 16; v++)
        add((uint32_t)v * 7919u, 0, 0, v);
    for (int v = 0; v < 16; v += 3)
        drop(v);
    for (int v = 0; v < 16; v++)
        cr_assert_eq(in_bucket((uint32_t)v * 7919u, v), v % 3 != 0, "value %d", v);
}

Test(slots, owner_lists_and_counts_follow_every_change) {
    cr_assert_eq(sb_slots_init(&t, sizeof(entry), 8, 2, 3), STDIO_BUS_OK);
    int32_t a = add(1, 0, 2, 1), b = add(2, 0, 1, 2), c = add(3, 1, 2, 3), d = add(4, 0, 2, 4);
    int got[8];
    cr_assert_eq(listed(0, 0, got), 3);
    cr_assert(got[0] == 4 && got[1] == 2 && got[2] == 1, "newest first");
    cr_assert_eq(sb_slots_owned(&t, 0, 0), 3);
    cr_assert_eq(sb_slots_owned(&t, 1, 2), 3);
    drop(b); /* the middle of owner 0's list */
    cr_assert_eq(listed(0, 0, got), 2);
    cr_assert(got[0] == 4 && got[1] == 1);
    cr_assert_eq(sb_slots_owned(&t, 1, 1), 0);
    cr_assert_eq(sb_slots_first(&t, 1, 1), SB_SLOT_NIL);
    drop(d); /* the head */
    drop(a); /* the last */
    cr_assert_eq(sb_slots_first(&t, 0, 0), SB_SLOT_NIL);
    cr_assert_eq(sb_slots_owned(&t, 0, 0), 0);
    cr_assert_eq(listed(1, 2, got), 1);
    cr_assert_eq(got[0], 3);
    (void)c;
}

Test(slots, an_entry_that_leaves_one_side_stays_on_the_other) {
    cr_assert_eq(sb_slots_init(&t, sizeof(entry), 4, 1, 2), STDIO_BUS_OK);
    int32_t a = add(9, 0, 1, 1);
    add(10, 0, 1, 2);
    sb_slots_leave(&t, a, 1, 1);
    at(a)->owner[1] = -1; /* as pending.c orphans a request (SB-I-23) */
    int got[4];
    cr_assert_eq(listed(1, 1, got), 1);
    cr_assert_eq(sb_slots_owned(&t, 1, 1), 1);
    cr_assert_eq(listed(0, 0, got), 2, "still its receiver's");
    cr_assert(in_bucket(9, 1));
    drop(a);
    cr_assert_eq(listed(0, 0, got), 1);
    cr_assert_eq(sb_slots_owned(&t, 1, 1), 1);
    cr_assert_eq(t.count, 1);
}

Test(slots, an_entry_with_no_owner_on_a_side_is_in_no_list_there) {
    cr_assert_eq(sb_slots_init(&t, sizeof(entry), 2, 1, 1), STDIO_BUS_OK);
    int32_t a = add(5, 0, -1, 1);
    cr_assert_neq(a, SB_SLOT_NIL);
    cr_assert_eq(sb_slots_owned(&t, 1, 0), 0);
    cr_assert_eq(sb_slots_first(&t, 1, 0), SB_SLOT_NIL);
    drop(a);
    cr_assert_eq(t.count, 0);
    cr_assert_eq(sb_slots_owned(&t, 0, 0), 0);
}
