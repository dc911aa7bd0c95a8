/* Diagnostics on stderr, the only place they may go: stdout carries
 * nothing but JSON-RPC (WORKER_SPEC.md SB-W-4, SB-T-3). Each note is one
 * line, `<program>[<pid>]: <text>`, written with one write(2) so that notes
 * of workers sharing the daemon's stderr do not interleave, and so that a
 * reader of that stderr (the conformance suite) can tell them from the
 * daemon's own log by their prefix. stderr stays blocking: it may be shared
 * with the daemon. */
#ifndef MC_DIAG_H
#define MC_DIAG_H

#include <stdbool.h>

/* Names the program in every note, and the exit status of mc_diag_oom.
 * Call first thing in main. */
void mc_diag_init(const char *program, int oom_status);
/* Enables mc_diag_debug (ref_worker's --verbose). */
void mc_diag_set_verbose(bool on);
void mc_diag_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A note written only when verbose. */
void mc_diag_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Notes "out of memory" and ends the process with the oom_status. A test
 * worker has no use for a degraded mode, so allocation failure is not an
 * error every caller must pass up. */
_Noreturn void mc_diag_oom(void);

#endif
