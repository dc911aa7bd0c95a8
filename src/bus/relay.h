/* The relay path: read -> frame -> route -> queue -> flush, with
 * backpressure (7.3.1), input overflow (7.3.2) and the per-round lists
 * (ready, held, doomed, dirty). Routing decisions come from router.c;
 * this file does the I/O and the logging around them. */
#ifndef SB_RELAY_H
#define SB_RELAY_H

#include "bus.h"
#include "watch.h"

#include <stdbool.h>
#include <stddef.h>

/* What the relay leaves to the peer's owner (worker supervision,
 * sb_supervise_verdict, or the client connections, sb_clients_verdict),
 * instead of calling up into it: one convention for both kinds, a client's
 * malformed line (4.3) included. Only a failed write, found wherever output
 * is flushed, is acted on here: a worker's stdin is lost (end of round), a
 * client is doomed. */
typedef enum {
    SB_RELAY_OK = 0,
    SB_RELAY_ENDED,       /* its input ended (EOF) */
    SB_RELAY_READ_FAILED, /* reading its input failed: see err */
    SB_RELAY_MALFORMED,   /* a line is not a JSON-RPC message (4.3, 5.3): see why */
    SB_RELAY_OVERFLOW,    /* a line longer than max_input_buffer (7.3.2) */
    SB_RELAY_NOMEM        /* no memory for its input buffer (logged) */
} sb_relay_event;

typedef struct {
    sb_relay_event event;
    sb_route_why why; /* SB_RELAY_MALFORMED: the router's reason */
    int err;          /* SB_RELAY_READ_FAILED: errno */
} sb_relay_verdict;

/* Puts p on the ready list: its buffered lines are routed at the end of
 * the round. */
void sb_relay_mark_ready(sb_bus *d, sb_peer *p);
/* Every held client leaves SB_CLIENT_HELD and is put on the ready list to
 * offer its line again (SB-I-45); called at the end of the round when
 * d->reoffer_held says an id was freed or the running workers changed. */
void sb_relay_release_held(sb_bus *d);
void sb_relay_release_waiters(sb_bus *d, sb_peer *out);
void sb_relay_set_full(sb_bus *d, sb_peer *p, bool full);
/* Closes a worker's stdin: nothing more goes to it, what was queued for it
 * is dropped, its output no longer counts as full and the inputs paused on
 * it resume (SB-7.3.1-3). The one place that closes a worker's stdin. */
void sb_relay_close_stdin(sb_bus *d, sb_peer *p);
/* A worker's stdin broke: closed as above, the worker takes no more
 * messages, and it is put on d->stdin_lost for its supervision
 * (sb_supervise_stdin_lost) at the end of the round. */
void sb_relay_stdin_lost(sb_bus *d, sb_peer *p);
/* SB-X-17: with limits.max_client_memory set, brings d->client_bytes up to
 * date with client c's buffers (call after they may have grown or shrunk);
 * d->over_budget is set when the sum goes over the budget. */
void sb_relay_recount(sb_bus *d, sb_client *c);
/* Queues one line for p; from (may be NULL) is paused when p's queue goes
 * over its cap. */
void sb_relay_send(sb_bus *d, sb_peer *p, const char *line, size_t len, sb_peer *from);
/* The one writable-fd path, for every peer: p's output fd is writable
 * (POLLOUT), or p gathered bytes this round. Writes what the fd takes; a
 * failed write ends p's output (a worker's stdin is lost, a client is
 * closed); an output back under its cap resumes the inputs paused on it
 * (SB-7.3.1-3); POLLOUT is watched while bytes remain; a closing client
 * whose output is written is closed (SB-X-14). */
bool sb_relay_write(sb_bus *d, sb_peer *p); /* false: the write failed */
/* sb_relay_write for each output that gathered bytes this round. */
void sb_relay_flush(sb_bus *d);
void sb_relay_send_error(sb_bus *d, sb_client *client, const char *id, size_t id_len,
                         const char *sid, size_t sid_len, const char *why);
/* Routes every complete buffered line of p until it is paused, held,
 * closed, or a worker's line calls for its supervision. */
sb_relay_verdict sb_relay_process(sb_bus *d, sb_peer *p);
/* One read from p's input, then sb_relay_process. */
sb_relay_verdict sb_relay_read(sb_bus *d, sb_peer *p);
/* A closing client (SB-X-14) whose output queue is empty is doomed now. */
void sb_relay_close_if_flushed(sb_bus *d, sb_client *c);
/* SB-X-21: writes, now, a notification telling a client it is refused. */
void sb_relay_notify_refused(sb_client *client, const char *why);
/* SB-X-24: the same notice, queued after what the client is owed already,
 * and the client is closed once its output is written (or after
 * drain_timeout_sec, as SB-X-14). */
void sb_relay_refuse(sb_bus *d, sb_client *client, const char *why);

#endif
