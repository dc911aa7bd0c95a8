#!/usr/bin/python3
"""fbus, a foreign stdio Bus daemon for the harness self-tests: a complete
implementation of the spec (v0.1.0) that shares nothing with the reference
daemon but the spec. See foreign/README.md and foreign/bus.py.

    foreign_daemon.py --config PATH [--stdio | --unix PATH | --tcp HOST:PORT]
                      [--verbose] [--defect NAME]
"""

import os
import resource
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from foreign import cli, journal as log, settings  # noqa: E402
from foreign.bus import Bus  # noqa: E402


def main(argv):
    try:
        opts = cli.parse(argv)
    except cli.UsageError as exc:
        log.error(str(exc))
        log.info(cli.USAGE)
        return cli.EX_USAGE
    if opts.usage:
        log.info(cli.USAGE)
        return 0
    log.VERBOSE = opts.verbose
    try:
        conf = settings.load(opts.config)
    except settings.Rejected as exc:
        log.error(f"settings refused: {exc}", file=os.path.basename(opts.config))
        return cli.EX_CONFIG
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    bus = Bus(opts, conf)
    if opts.mode != "stdio":
        try:
            bus.open_listener()
        except OSError as exc:
            log.error(f"cannot listen on {opts.address}: {exc.strerror or exc}")
            return cli.EX_UNAVAILABLE
    if opts.defect:
        log.info("defect switched on", defect=opts.defect)
    bus.start()
    bus.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
