/* A client's life (sb_client_state in client.h) and the one function that
 * changes it. */
#ifndef SB_CLIENT_STATE_H
#define SB_CLIENT_STATE_H

#include "bus.h"

#include <stdbool.h>

/* The one place a client's state changes: checks the transition against
 * the table in client_state.c, disarms the timer of the state left and
 * arms that of the state entered, keeps the held, ending and doomed lists,
 * and sets what the client's fds are watched for. */
void sb_client_enter(sb_bus *d, sb_client *c, sb_client_state to);
/* Closes c at the end of the round (redis's freeClientAsync: no handler
 * ever runs on a client freed under it); nothing when it is doomed already. */
void sb_client_doom(sb_bus *d, sb_client *c);
const char *sb_client_state_name(sb_client_state s);

#endif
