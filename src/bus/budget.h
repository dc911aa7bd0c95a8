/* Who is guilty under the clients' memory budget (SB-X-17): how long each
 * client has held bytes it does not move, and the order in which clients
 * are closed when their buffers go over limits.max_client_memory. */
#ifndef SB_BUDGET_H
#define SB_BUDGET_H

#include "client.h"

#include <stdbool.h>
#include <stdint.h>

/* After output was queued for client c or written to it. */
void sb_budget_note_unread(sb_client *c);

/* After c's input was framed; `moved`: a line of it was completed. */
void sb_budget_note_unfinished(sb_client *c, bool moved);

/* Since when c has held bytes it does not move; 0: it holds none. */
int64_t sb_budget_holding_since(const sb_client *c);

/* True when a is closed before b. */
bool sb_budget_closes_before(const sb_client *a, const sb_client *b);

#endif
