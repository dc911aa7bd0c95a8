/* The worker's single-threaded poll loop: stdin read non-blocking and cut
 * into lines (each logged as an `in` record and handed to dispatch.h),
 * stdout written from the queue as the pipe takes it, the timers (delays,
 * progress, the flood, --crash-after-ms, --term-delay-ms), signals through
 * the self-pipe, and the end: EOF drain, terminate, quit. */
#ifndef MW_LOOP_H
#define MW_LOOP_H

#include "worker.h"

/* Runs until the worker exits voluntarily; returns the exit status (the
 * `exit` record is logged). Dying of a signal does not return. */
int mw_loop_run(mw_worker *w);

#endif
