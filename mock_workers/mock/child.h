/* --spawn-child setsid|double-fork: a helper process that leaves the
 * worker's process group, as a daemonizing helper does, so a test can check
 * that it ends with the worker all the same (SPEC.md SB-X-22); with
 * group, one that stays in it, so a test can check that the daemon's
 * signals to the worker reach it (SB-X-18). */
#ifndef MW_CHILD_H
#define MW_CHILD_H

#include "log.h"
#include "opts.h"

/* Starts the helper: with MW_CHILD_GROUP it is the worker's child in its
 * process group, SIGTERM taking its default action; with MW_CHILD_SETSID
 * the worker's child in a session of its own; with MW_CHILD_DOUBLE_FORK its parent (in that
 * session) exits at once, so it is nobody's child but its reaper's. It
 * sleeps until killed, its stdio on /dev/null. Returns once it exists, with
 * the record `child <its pid>` in the log. Returns MC_OK or MC_ERR. */
int mw_child_spawn(const mw_log *log, mw_child_kind how);

#endif
