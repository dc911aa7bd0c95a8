#include "client_table.h"
#include "bus_limits.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

int sb_client_table_init(sb_client_table *t) {
    *t = (sb_client_table){0};
    t->at = calloc(STDIO_BUS_MAX_CONNECTIONS, sizeof *t->at);
    t->returned = malloc(STDIO_BUS_MAX_CONNECTIONS * sizeof *t->returned);
    return t->at && t->returned ? STDIO_BUS_OK : STDIO_BUS_ERR;
}

void sb_client_table_fini(sb_client_table *t) {
    free(t->at);
    free(t->returned);
    *t = (sb_client_table){0};
}

sb_client *sb_client_table_take(sb_client_table *t) {
    int slot;
    if (t->returned_count > 0)
        slot = t->returned[--t->returned_count];
    else if (t->fresh < STDIO_BUS_MAX_CONNECTIONS)
        slot = t->fresh++;
    else
        return NULL;
    sb_client *c = &t->at[slot];
    memset(c, 0, sizeof *c);
    c->peer.index = slot;
    c->peer.client_state = &c->state;
    t->count++;
    return c;
}

void sb_client_table_give_back(sb_client_table *t, sb_client *c) {
    t->returned[t->returned_count++] = c->peer.index;
    t->count--;
}
