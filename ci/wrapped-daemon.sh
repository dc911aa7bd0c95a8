#!/bin/sh
# The daemon named by SB_WRAPPED_DAEMON, run under SB_DAEMON_WRAPPER (a
# command line, e.g. the valgrind one ci/valgrind.py sets): the conformance
# suite judges it as any daemon (run.py --daemon ci/wrapped-daemon.sh), at
# the pace its preflight measures (issue 37: the same verdict under valgrind).
[ -n "$SB_WRAPPED_DAEMON" ] || { echo "wrapped-daemon.sh: SB_WRAPPED_DAEMON is not set" >&2; exit 2; }
# shellcheck disable=SC2086 # the wrapper is a command line: split on blanks
exec $SB_DAEMON_WRAPPER "$SB_WRAPPED_DAEMON" "$@"
