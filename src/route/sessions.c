#include "sessions.h"
#include "hash.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

#define NIL (-1)

int sb_sessions_init(sb_sessions *t, int capacity, int workers, int clients) {
    memset(t, 0, sizeof *t);
    uint32_t buckets = sb_hash_pow2((uint32_t)capacity * 2);
    t->entries = calloc((size_t)capacity, sizeof *t->entries);
    t->buckets = malloc(buckets * sizeof *t->buckets);
    t->worker_head = malloc((size_t)workers * sizeof *t->worker_head);
    t->client_head = malloc((size_t)clients * sizeof *t->client_head);
    if (!t->entries || !t->buckets || !t->worker_head || !t->client_head) {
        sb_sessions_fini(t);
        return STDIO_BUS_ERR;
    }
    t->capacity = capacity;
    t->bucket_mask = buckets - 1;
    t->worker_slots = workers;
    t->client_slots = clients;
    for (uint32_t i = 0; i < buckets; i++)
        t->buckets[i] = NIL;
    for (int i = 0; i < workers; i++)
        t->worker_head[i] = NIL;
    for (int i = 0; i < clients; i++)
        t->client_head[i] = NIL;
    /* As in pending.c: entries are handed out from fresh_next up, so pages
     * are touched only as far as sessions reach (RSS at start, issue 26). */
    t->free_head = NIL;
    t->fresh_next = 0;
    return STDIO_BUS_OK;
}

void sb_sessions_fini(sb_sessions *t) {
    free(t->entries);
    free(t->buckets);
    free(t->worker_head);
    free(t->client_head);
    memset(t, 0, sizeof *t);
}

sb_session *sb_sessions_find(sb_sessions *t, const char *key, size_t len) {
    uint32_t h = sb_hash_bytes(0, key, len);
    for (int32_t i = t->buckets[h & t->bucket_mask]; i != NIL; i = t->entries[i].next_in_bucket) {
        sb_session *s = &t->entries[i];
        if (s->hash == h && s->key_len == len && sb_bytes_equal(s->key, key, len))
            return s;
    }
    return NULL;
}

static void list_push(sb_session *entries, int32_t *head, int32_t index, int by_worker) {
    sb_session *s = &entries[index];
    int32_t old = *head;
    if (by_worker) {
        s->worker_prev = NIL;
        s->worker_next = old;
        if (old != NIL)
            entries[old].worker_prev = index;
    } else {
        s->client_prev = NIL;
        s->client_next = old;
        if (old != NIL)
            entries[old].client_prev = index;
    }
    *head = index;
}

sb_session *sb_sessions_add(sb_sessions *t, const char *key, size_t len, int worker, int client) {
    if (len == 0 || len > sizeof t->entries[0].key)
        return NULL;
    int32_t index;
    if (t->free_head != NIL) {
        index = t->free_head;
        t->free_head = t->entries[index].next_in_bucket;
    } else if (t->fresh_next < t->capacity) {
        index = t->fresh_next++;
    } else {
        return NULL;
    }
    sb_session *s = &t->entries[index];

    s->hash = sb_hash_bytes(0, key, len);
    s->key_len = (uint16_t)len;
    memcpy(s->key, key, len);
    s->worker = worker;
    s->client = client;
    int32_t *bucket = &t->buckets[s->hash & t->bucket_mask];
    s->next_in_bucket = *bucket;
    *bucket = index;
    list_push(t->entries, &t->worker_head[worker], index, 1);
    list_push(t->entries, &t->client_head[client], index, 0);
    t->count++;
    return s;
}

void sb_sessions_remove(sb_sessions *t, sb_session *s) {
    int32_t index = (int32_t)(s - t->entries);
    int32_t *link = &t->buckets[s->hash & t->bucket_mask];
    while (*link != index)
        link = &t->entries[*link].next_in_bucket;
    *link = s->next_in_bucket;

    if (s->worker_prev != NIL)
        t->entries[s->worker_prev].worker_next = s->worker_next;
    else
        t->worker_head[s->worker] = s->worker_next;
    if (s->worker_next != NIL)
        t->entries[s->worker_next].worker_prev = s->worker_prev;

    if (s->client_prev != NIL)
        t->entries[s->client_prev].client_next = s->client_next;
    else
        t->client_head[s->client] = s->client_next;
    if (s->client_next != NIL)
        t->entries[s->client_next].client_prev = s->client_prev;

    s->key_len = 0;
    s->next_in_bucket = t->free_head;
    t->free_head = index;
    t->count--;
}

int sb_sessions_drop_worker(sb_sessions *t, int worker,
                            void (*visit)(void *ctx, const sb_session *s), void *ctx) {
    int dropped = 0;
    while (t->worker_head[worker] != NIL) {
        sb_session *s = &t->entries[t->worker_head[worker]];
        if (visit)
            visit(ctx, s);
        sb_sessions_remove(t, s);
        dropped++;
    }
    return dropped;
}

int sb_sessions_drop_client(sb_sessions *t, int client,
                            void (*visit)(void *ctx, const sb_session *s), void *ctx) {
    int dropped = 0;
    while (t->client_head[client] != NIL) {
        sb_session *s = &t->entries[t->client_head[client]];
        if (visit)
            visit(ctx, s);
        sb_sessions_remove(t, s);
        dropped++;
    }
    return dropped;
}
