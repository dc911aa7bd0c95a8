/* Unsolicited notification flood (--mode flood): notifications at --rate
 * per second (0: as fast as stdout takes them), --count of them (0: no
 * end), each
 *   {"jsonrpc":"2.0","method":"notifications/message","params":{"seq":<n>},"sessionId":<SID>}
 * with n = 1, 2, ... Generation pauses while 64 KiB of output is queued, so
 * a reader that stops reading stops the flood instead of growing memory. */
#ifndef MW_FLOOD_H
#define MW_FLOOD_H

#include <stdbool.h>
#include <stdint.h>

#include "out.h"

typedef struct mw_flood {
    bool active;
    double rate;
    long count;
    long sent;
    int64_t start;
    char *sid_json; /* owned; NULL: no sessionId */
} mw_flood;

void mw_flood_init(mw_flood *f);
void mw_flood_fini(mw_flood *f);
/* Starts the flood; sid_json (copied) may be NULL. */
void mw_flood_start(mw_flood *f, double rate, long count, const char *sid_json, int64_t now);
void mw_flood_stop(mw_flood *f);
/* Queues every notification due by now (within the queue cap). */
void mw_flood_tick(mw_flood *f, mw_out *out, int64_t now);
/* When the next notification falls due, or 0 (none, or waiting for the
 * queue to drain, which POLLOUT covers). */
int64_t mw_flood_deadline(const mw_flood *f, const mw_out *out, int64_t now);

#endif
