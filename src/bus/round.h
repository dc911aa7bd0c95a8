/* The daemon's per-round lists: the peers something is left to do for at
 * the end of the dispatch round (daemon.c finish_round), or while they are
 * in a state (client_state.c). Plain arrays sized once for every peer that
 * can be on them; no allocation per message. */
#ifndef SB_ROUND_H
#define SB_ROUND_H

#include "peer.h"

typedef struct {
    sb_peer **at;
    int count;
} sb_peer_list;

typedef struct {
    sb_peer_list ready;      /* buffered lines to process (sb_relay_mark_ready) */
    sb_peer_list dirty;      /* queued bytes to write (sb_relay_send, sb_relay_flush) */
    sb_peer_list doomed;     /* clients in SB_CLIENT_DOOMED: closed at the end of the round */
    sb_peer_list held;       /* clients in SB_CLIENT_HELD (SB-I-45) */
    sb_peer_list ending;     /* socket clients in SB_CLIENT_ENDING (SB-I-41) */
    sb_peer_list stdin_lost; /* workers whose stdin broke (sb_relay_stdin_lost) */
} sb_round;

/* Returns 0 or STDIO_BUS_ERR (out of memory); sb_round_fini either way. */
int sb_round_init(sb_round *r, int workers, int clients);
void sb_round_fini(sb_round *r);

static inline void sb_list_push(sb_peer_list *l, sb_peer *p) {
    l->at[l->count++] = p;
}

/* Removes p (order is not kept); nothing when p is not on l. */
void sb_list_remove(sb_peer_list *l, const sb_peer *p);

#endif
