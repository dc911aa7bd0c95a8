#include "slots.h"
#include "hash.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

int sb_slots_init(sb_slots *t, size_t stride, int capacity, int owners0, int owners1) {
    memset(t, 0, sizeof *t);
    uint32_t buckets = sb_hash_pow2((uint32_t)capacity * 2);
    int owners[SB_SLOT_SIDES] = {owners0, owners1};
    /* calloc: pages are touched only as entries are first used (issue 26) */
    t->links = calloc((size_t)capacity, sizeof *t->links);
    t->entries = calloc((size_t)capacity, stride);
    t->buckets = malloc(buckets * sizeof *t->buckets);
    int ok = t->links && t->entries && t->buckets;
    for (int side = 0; side < SB_SLOT_SIDES; side++) {
        t->head[side] = malloc((size_t)owners[side] * sizeof *t->head[side]);
        t->owned[side] = calloc((size_t)owners[side], sizeof *t->owned[side]);
        ok = ok && t->head[side] && t->owned[side];
    }
    if (!ok) {
        sb_slots_fini(t);
        return STDIO_BUS_ERR;
    }
    t->stride = stride;
    t->capacity = capacity;
    t->bucket_mask = buckets - 1;
    for (uint32_t i = 0; i < buckets; i++)
        t->buckets[i] = SB_SLOT_NIL;
    for (int side = 0; side < SB_SLOT_SIDES; side++) {
        t->owners[side] = owners[side];
        for (int i = 0; i < owners[side]; i++)
            t->head[side][i] = SB_SLOT_NIL;
    }
    t->free_head = SB_SLOT_NIL;
    t->fresh_next = 0;
    return STDIO_BUS_OK;
}

void sb_slots_fini(sb_slots *t) {
    free(t->links);
    free(t->entries);
    free(t->buckets);
    for (int side = 0; side < SB_SLOT_SIDES; side++) {
        free(t->head[side]);
        free(t->owned[side]);
    }
    memset(t, 0, sizeof *t);
}
