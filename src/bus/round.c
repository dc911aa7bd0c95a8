#include "round.h"
#include "status.h"

#include <stdlib.h>

static int list_init(sb_peer_list *l, int cap) {
    l->at = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *l->at);
    l->count = 0;
    return l->at ? STDIO_BUS_OK : STDIO_BUS_ERR;
}

int sb_round_init(sb_round *r, int workers, int clients) {
    int rc = list_init(&r->ready, workers + clients);
    rc |= list_init(&r->dirty, workers + clients);
    rc |= list_init(&r->doomed, workers + clients);
    rc |= list_init(&r->held, clients);
    rc |= list_init(&r->ending, clients);
    rc |= list_init(&r->stdin_lost, workers);
    return rc ? STDIO_BUS_ERR : STDIO_BUS_OK;
}

void sb_round_fini(sb_round *r) {
    free(r->ready.at);
    free(r->dirty.at);
    free(r->doomed.at);
    free(r->held.at);
    free(r->ending.at);
    free(r->stdin_lost.at);
}

void sb_list_remove(sb_peer_list *l, const sb_peer *p) {
    for (int i = 0; i < l->count; i++)
        if (l->at[i] == p) {
            l->at[i] = l->at[--l->count];
            return;
        }
}
