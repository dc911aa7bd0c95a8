/* A tiny poll(2) event loop (the shape of redis's ae.c).
 *
 * Each registered fd has one handler and an interest mask (POLLIN and/or
 * POLLOUT). Events that fire are collected first and dispatched after, and
 * a handler removed or re-registered during dispatch never sees an event
 * that was meant for the fd's previous owner. Timers are the caller's:
 * sb_loop_run_once takes the time to the earliest deadline. */
#ifndef SB_LOOP_H
#define SB_LOOP_H

#include <poll.h>
#include <stdint.h>

/* A handler gets its loop, so that an owner that embeds the loop finds
 * itself from it (sb_bus_of_loop) without a global. */
typedef struct sb_loop sb_loop;
typedef void (*sb_loop_fn)(sb_loop *l, void *data, int fd, short revents);

typedef struct {
    sb_loop_fn fn;
    void *data;
    uint32_t gen; /* bumped at every (re)registration */
    int dense;    /* index in pfds, -1 when not registered */
} sb_loop_slot;

typedef struct {
    int fd;
    short revents;
    uint32_t gen;
} sb_loop_fired;

struct sb_loop {
    sb_loop_slot *slots; /* indexed by fd */
    int slot_count;
    struct pollfd *pfds; /* dense */
    int count;
    int capacity;
    sb_loop_fired *fired;
};

int sb_loop_init(sb_loop *l);
void sb_loop_fini(sb_loop *l);

/* Registers fd (not yet registered) with a handler and an interest mask.
 * Returns 0 or STDIO_BUS_ERR (out of memory). */
int sb_loop_add(sb_loop *l, int fd, short events, sb_loop_fn fn, void *data);
/* Changes the interest mask of a registered fd (0 = keep it, but wait for
 * nothing; POLLHUP/POLLERR are still reported). */
void sb_loop_set(sb_loop *l, int fd, short events);
short sb_loop_get(const sb_loop *l, int fd);
/* Unregisters fd; a no-op when it is not registered. Call before close(). */
void sb_loop_del(sb_loop *l, int fd);

/* Waits up to timeout_ms (-1 = no limit) and dispatches what fired.
 * Returns the number of events dispatched, or STDIO_BUS_ERR. EINTR is not
 * an error (signals arrive through the self-pipe). */
int sb_loop_run_once(sb_loop *l, int timeout_ms);

#endif
