#include "affinity.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

int sb_affinity_init(sb_affinity *a, int workers, int clients) {
    memset(a, 0, sizeof *a);
    a->worker_of = malloc((size_t)clients * sizeof *a->worker_of);
    a->next = malloc((size_t)clients * sizeof *a->next);
    a->prev = malloc((size_t)clients * sizeof *a->prev);
    a->head = malloc((size_t)workers * sizeof *a->head);
    a->count = calloc((size_t)workers, sizeof *a->count);
    if (!a->worker_of || !a->next || !a->prev || !a->head || !a->count) {
        sb_affinity_fini(a);
        return STDIO_BUS_ERR;
    }
    for (int c = 0; c < clients; c++)
        a->worker_of[c] = a->next[c] = a->prev[c] = SB_AFFINITY_UNBOUND;
    for (int w = 0; w < workers; w++)
        a->head[w] = SB_AFFINITY_UNBOUND;
    a->workers = workers;
    a->clients = clients;
    return STDIO_BUS_OK;
}

void sb_affinity_fini(sb_affinity *a) {
    free(a->worker_of);
    free(a->next);
    free(a->prev);
    free(a->head);
    free(a->count);
    memset(a, 0, sizeof *a);
}

int sb_affinity_worker(const sb_affinity *a, int client) {
    return a->worker_of[client];
}

void sb_affinity_bind(sb_affinity *a, int client, int worker) {
    int old = a->head[worker];
    a->worker_of[client] = worker;
    a->prev[client] = SB_AFFINITY_UNBOUND;
    a->next[client] = old;
    if (old >= 0)
        a->prev[old] = client;
    a->head[worker] = client;
    a->count[worker]++;
}

int sb_affinity_unbind(sb_affinity *a, int client) {
    int w = a->worker_of[client];
    if (w < 0)
        return SB_AFFINITY_UNBOUND;
    int prev = a->prev[client], next = a->next[client];
    if (prev >= 0)
        a->next[prev] = next;
    else
        a->head[w] = next;
    if (next >= 0)
        a->prev[next] = prev;
    a->worker_of[client] = a->next[client] = a->prev[client] = SB_AFFINITY_UNBOUND;
    a->count[w]--;
    return w;
}

int sb_affinity_client(const sb_affinity *a, int worker) {
    return a->count[worker] > 1 ? SB_AFFINITY_SHARED : a->head[worker];
}

int sb_affinity_first(const sb_affinity *a, int worker) {
    return a->head[worker];
}

int sb_affinity_count(const sb_affinity *a, int worker) {
    return a->count[worker];
}
