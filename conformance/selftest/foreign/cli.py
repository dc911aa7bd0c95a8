"""Command line of fbus.

    foreign_daemon.py --config PATH [--stdio | --unix PATH | --tcp HOST:PORT]
                      [--verbose] [--defect NAME] [--usage]

Options also take the --name=value form. --verbose logs debug lines and lets
workers write to fbus's own stderr (by default their stderr goes to
/dev/null). --usage prints this text on stderr and exits 0. --defect (or the
FOREIGN_BUS_DEFECT environment variable) switches on deliberate defects, for
the harness self-tests: one name, or several separated by commas. Command-line errors exit 64, settings errors 78."""

import os

USAGE = ("usage: foreign_daemon.py --config PATH [--stdio | --unix PATH | --tcp HOST:PORT] "
         "[--verbose] [--defect NAME[,NAME...]]")

DEFECTS = ("crash-on-sigterm", "no-exit-on-eof-flood", "no-restart-after-exit0",
           "drops-slow-reader", "no-two-pool-routing", "dies-after-malformed",
           "truncate-full-worker-pipe", "socketpair-workers")

EX_USAGE, EX_CONFIG, EX_UNAVAILABLE = 64, 78, 69


class UsageError(Exception):
    pass


class Options:
    config = None
    mode = "stdio"
    address = None
    verbose = False
    defect = None
    usage = False


def parse_tcp(text):
    """'host:port' or '[v6]:port' -> (host, port)."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0 or text[close + 1:close + 2] != ":":
            raise UsageError(f"cannot understand the TCP address {text!r}")
        host, port = text[1:close], text[close + 2:]
    else:
        host, sep, port = text.rpartition(":")
        if not sep or ":" in host:
            raise UsageError(f"cannot understand the TCP address {text!r} (HOST:PORT or [V6]:PORT)")
    if not host:
        raise UsageError(f"the TCP address {text!r} has no host")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UsageError(f"the TCP address {text!r} has no usable port")
    return host, int(port)


def parse(argv):
    o = Options()
    modes = []
    args = list(argv)
    i = 0

    def value(name, inline):
        nonlocal i
        if inline is not None:
            return inline
        i += 1
        if i >= len(args):
            raise UsageError(f"{name} needs a value")
        return args[i]

    while i < len(args):
        a = args[i]
        name, eq, inline = a.partition("=")
        inline = inline if eq else None
        if name == "--config":
            if o.config is not None:
                raise UsageError("--config given twice")
            o.config = value(name, inline)
        elif name == "--stdio" and inline is None:
            modes.append(("stdio", None))
        elif name == "--unix":
            modes.append(("unix", value(name, inline)))
        elif name == "--tcp":
            modes.append(("tcp", value(name, inline)))
        elif name in ("--verbose", "-v") and inline is None:
            o.verbose = True
        elif name == "--defect":
            o.defect = value(name, inline)
        elif name == "--usage" and inline is None:
            o.usage = True
        else:
            raise UsageError(f"unrecognised argument {a!r}")
        i += 1
    if o.usage:
        return o
    if len(modes) > 1:
        raise UsageError("choose one of --stdio, --unix and --tcp")
    if modes:
        o.mode, o.address = modes[0]
    if o.mode == "tcp":
        o.address = parse_tcp(o.address)
    if o.mode == "unix" and not o.address:
        raise UsageError("--unix needs a path")
    if o.config is None:
        raise UsageError("no settings file: give --config PATH")
    if o.defect is None:
        o.defect = os.environ.get("FOREIGN_BUS_DEFECT") or None
    for name in (o.defect or "").split(","):
        if o.defect is not None and name not in DEFECTS:
            raise UsageError(f"unknown defect {name!r} (one of {', '.join(DEFECTS)})")
    return o
