/* The stdio Bus daemon: one thread, one poll loop (SB-3.1-5), clients on
 * stdio or a socket, worker pools, routing, failure handling, shutdown. */
#ifndef SB_DAEMON_H
#define SB_DAEMON_H

#include "cli.h"
#include "config.h"

/* Runs the daemon until shutdown. cfg stays owned by the caller.
 * Returns the process exit code: 0 after a graceful shutdown (SB-10.2-6),
 * 1 when start-up failed (reason logged). */
int sb_daemon_run(const sb_config *cfg, const sb_options *opt);

#endif
