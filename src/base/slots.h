/* A slot table: entries of a fixed capacity, each reached through a hash
 * bucket and listed under its owner on each of two sides. It is the storage
 * the Session table (sessions.c: a session under its worker and its client)
 * and the pending Request table (pending.c: a request under its receiver and
 * its sender) share; what an entry holds, what its key is and how two keys
 * match stay theirs.
 *
 * The table keeps one link per entry (its bucket chain, its place in its
 * owners' lists, its hash) and, beside the links, an array of the caller's
 * entries of `stride` bytes, index for index. An entry's owners are the
 * caller's fields: the calls that change a list take them, so they are
 * stored once. Entries are handed out returned ones first (last in, first
 * out), then never-used ones from 0 up, so the pages of a table sized for a
 * hard limit are touched only as far as traffic reaches (RSS at start,
 * issue 26). The per-message calls are inline: both tables are on the path
 * of every request and its answer (bench/ir.sh). */
#ifndef SB_SLOTS_H
#define SB_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#define SB_SLOT_NIL   (-1)
#define SB_SLOT_SIDES 2

typedef struct {
    int32_t next_in_bucket;                           /* a returned entry: the next returned one */
    int32_t prev[SB_SLOT_SIDES], next[SB_SLOT_SIDES]; /* in its owner's list on each side */
    uint32_t hash;
} sb_slot;

typedef struct {
    sb_slot *links; /* one per entry */
    void *entries;  /* capacity entries of stride bytes, zeroed at init */
    size_t stride;
    int32_t *buckets;
    uint32_t bucket_mask;
    int32_t free_head;  /* returned entries, chained through next_in_bucket */
    int32_t fresh_next; /* entries from here up were never used */
    int count;
    int capacity;
    int32_t *head[SB_SLOT_SIDES]; /* per owner: its newest entry */
    int *owned[SB_SLOT_SIDES];    /* per owner: how many entries it holds */
    int owners[SB_SLOT_SIDES];
} sb_slots;

/* Allocates capacity entries of stride bytes and their links, and the lists
 * of owners[0] and owners[1] owners. Returns 0 or STDIO_BUS_ERR (out of
 * memory). */
int sb_slots_init(sb_slots *t, size_t stride, int capacity, int owners0, int owners1);
void sb_slots_fini(sb_slots *t);

static inline sb_slot *sb_slots_link(const sb_slots *t, int32_t index) {
    return &t->links[index];
}

/* The index of one of the caller's entries */
static inline int32_t sb_slots_index(const sb_slots *t, const void *entry) {
    return (int32_t)(((const char *)entry - (const char *)t->entries) / (ptrdiff_t)t->stride);
}

/* The first entry of the bucket a hash falls in; the next is its link's
 * next_in_bucket. A bucket holds entries of other hashes too. */
static inline int32_t sb_slots_bucket(const sb_slots *t, uint32_t hash) {
    return t->buckets[hash & t->bucket_mask];
}

/* The newest entry of an owner on a side (SB_SLOT_NIL: none); the next is
 * its link's next[side]. */
static inline int32_t sb_slots_first(const sb_slots *t, int side, int owner) {
    return t->head[side][owner];
}

static inline int sb_slots_owned(const sb_slots *t, int side, int owner) {
    return t->owned[side][owner];
}

static inline void sb_slots_join_(sb_slots *t, int32_t index, int side, int owner) {
    sb_slot *s = &t->links[index];
    s->prev[side] = SB_SLOT_NIL;
    s->next[side] = SB_SLOT_NIL;
    if (owner < 0)
        return;
    int32_t old = t->head[side][owner];
    s->next[side] = old;
    if (old != SB_SLOT_NIL)
        t->links[old].prev[side] = index;
    t->head[side][owner] = index;
    t->owned[side][owner]++;
}

/* Hands out an entry for this hash, listed under owner0 and owner1 (an owner
 * < 0: in no list on that side). Returns its index, SB_SLOT_NIL when the
 * table is full. The caller fills in its entry. */
static inline int32_t sb_slots_take(sb_slots *t, uint32_t hash, int owner0, int owner1) {
    int32_t index;
    if (t->free_head != SB_SLOT_NIL) {
        index = t->free_head;
        t->free_head = t->links[index].next_in_bucket;
    } else if (t->fresh_next < t->capacity) {
        index = t->fresh_next++;
    } else {
        return SB_SLOT_NIL;
    }
    sb_slot *s = &t->links[index];
    s->hash = hash;
    int32_t *bucket = &t->buckets[hash & t->bucket_mask];
    s->next_in_bucket = *bucket;
    *bucket = index;
    sb_slots_join_(t, index, 0, owner0);
    sb_slots_join_(t, index, 1, owner1);
    t->count++;
    return index;
}

/* Takes an entry out of its owner's list on one side (it stays in the
 * table, in no list on that side). */
static inline void sb_slots_leave(sb_slots *t, int32_t index, int side, int owner) {
    if (owner < 0)
        return;
    sb_slot *s = &t->links[index];
    if (s->prev[side] != SB_SLOT_NIL)
        t->links[s->prev[side]].next[side] = s->next[side];
    else
        t->head[side][owner] = s->next[side];
    if (s->next[side] != SB_SLOT_NIL)
        t->links[s->next[side]].prev[side] = s->prev[side];
    s->prev[side] = s->next[side] = SB_SLOT_NIL;
    t->owned[side][owner]--;
}

/* Returns an entry to the table: out of its bucket and of the lists of its
 * owners (< 0: none on that side). */
static inline void sb_slots_release(sb_slots *t, int32_t index, int owner0, int owner1) {
    sb_slot *s = &t->links[index];
    int32_t *link = &t->buckets[s->hash & t->bucket_mask];
    while (*link != index)
        link = &t->links[*link].next_in_bucket;
    *link = s->next_in_bucket;
    sb_slots_leave(t, index, 0, owner0);
    sb_slots_leave(t, index, 1, owner1);
    s->next_in_bucket = t->free_head;
    t->free_head = index;
    t->count--;
}

#endif
