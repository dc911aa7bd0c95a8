/* Diagnostics on stderr, the only place they may go: stdout carries
 * nothing but JSON-RPC (WORKER_SPEC.md SB-W-4, SB-T-3). Each note is one
 * line, `ref_worker[<pid>]: <text>`, written with one write(2) so that
 * notes of workers sharing the daemon's stderr do not interleave. stderr
 * stays blocking: it may be shared with the daemon. */
#ifndef REF_LOG_H
#define REF_LOG_H

#include <stdbool.h>

/* Enables ref_log_debug (--verbose). */
void ref_log_set_verbose(bool on);
void ref_log_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A note written only with --verbose (each message handled). */
void ref_log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
