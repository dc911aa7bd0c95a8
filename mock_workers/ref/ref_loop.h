/* The worker's single-threaded poll loop: stdin read non-blocking and cut
 * into lines, stdout written from the queue as the pipe takes it, timers
 * for slow calls, signals through the self-pipe.
 *
 * End of work: at stdin EOF or on SIGTERM/SIGINT the worker reads nothing
 * more, answers what is in flight, writes all queued output and exits 0
 * (SB-T-15, SB-T-16, SB-W-11, SB-R-3). */
#ifndef REF_LOOP_H
#define REF_LOOP_H

/* Longest input line, newline excluded. A longer one is answered with
 * -32700 and skipped up to its newline. */
#define REF_LOOP_MAX_LINE (4u << 20)

/* Runs until the work is done; returns the exit status (ref_status.h). */
int ref_loop_run(void);

#endif
