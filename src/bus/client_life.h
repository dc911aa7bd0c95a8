/* The states of a client's life, apart from the client (client.h), so that
 * every peer can show the relay its client's state (peer.h). */
#ifndef SB_CLIENT_LIFE_H
#define SB_CLIENT_LIFE_H

/* A client's life; changed only by sb_client_enter (client_state.c), which
 * says which transitions there are. Pausing by backpressure (blocked_on)
 * and a full output (full_since_ms) are not states: workers have them too,
 * in their sb_peer. */
typedef enum {
    SB_CLIENT_FREE = 0, /* the slot holds no client */
    SB_CLIENT_OPEN,     /* read and routed */
    SB_CLIENT_HELD,     /* SB-I-45: its next line waits for its id to be free; not read */
    SB_CLIENT_ENDING,   /* its input ended (SB-I-41, SB-I-5): answers owed */
    SB_CLIENT_CLOSING,  /* SB-X-14: its worker exited: not read, closed once out is written */
    SB_CLIENT_DOOMED    /* closed at the end of the round */
} sb_client_state;

#endif
