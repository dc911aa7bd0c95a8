/* The client slots (STDIO_BUS_MAX_CONNECTIONS), handed out and returned by
 * the client connections (clients.c) only; everyone else reads a client by
 * its slot (its router id). */
#ifndef SB_CLIENT_TABLE_H
#define SB_CLIENT_TABLE_H

#include "client.h"

typedef struct {
    sb_client *at; /* the slots; a never-used one is all zero: SB_PEER_FREE */
    int *returned; /* slots given back, reused last-in first-out */
    int returned_count;
    int fresh; /* slots from here up were never used */
    int count; /* clients connected */
} sb_client_table;

/* Returns 0 or STDIO_BUS_ERR (out of memory); call fini after either. */
int sb_client_table_init(sb_client_table *t);
void sb_client_table_fini(sb_client_table *t);
/* A free slot, zeroed, its index set; NULL when every slot is in use. The
 * last one given back first, then never-used ones, lowest first, so the
 * table's pages are touched only as far as connections reach (issue 26). */
sb_client *sb_client_table_take(sb_client_table *t);
/* c's slot is free again (c's kind is SB_PEER_FREE). */
void sb_client_table_give_back(sb_client_table *t, sb_client *c);

#endif
