"""Operating modes and connection lifecycle (spec 4.1), the command line
(SB-I-33, SB-X-1..3) and socket details (SB-I-22; a client's half-close, SB-I-41, is in
test_hostile.py).

Which sockets the daemon listens on is read from /proc/<pid>/net/{unix,tcp,
tcp6}, matched against the socket inodes in /proc/<pid>/fd."""

import dataclasses
import os
import re
import signal
import socket
import stat
import time

import pytest

from stdio_bus_conformance import DaemonExited, DaemonTimeout, NeverComes, check, checking, evidence, wait_timeout

SO_ACCEPTCON = 0x10000  # /proc/net/unix "Flags": the socket is listening
TCP_LISTEN = "0A"


# -- local helpers (candidates for the harness: see the report) ------------------
def _socket_inodes(pid):
    return {int(t[8:-1]) for t in _fds(pid).values() if t.startswith("socket:[")}


def _fds(pid):
    base = f"/proc/{pid}/fd"
    out = {}
    for name in os.listdir(base):
        try:
            out[int(name)] = os.readlink(f"{base}/{name}")
        except OSError:
            continue
    return out


def _tcp_addr(hexaddr):
    """'0100007F:1F90' or a 32-digit IPv6 form -> (host, port)."""
    host, port = hexaddr.split(":")
    raw = bytes.fromhex(host)
    # /proc prints each 32-bit word in host (little-endian) order
    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    fam = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return socket.inet_ntop(fam, raw), int(port, 16)


def tcp_sockets(pid):
    """The inodes of the TCP sockets pid holds, in any state."""
    inodes, out = _socket_inodes(pid), set()
    for fam in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{fam}") as f:
                lines = f.readlines()[1:]
        except FileNotFoundError:
            continue
        out |= {int(line.split()[9]) for line in lines if int(line.split()[9]) in inodes}
    return out


def listening_sockets(pid):
    """[(family, address)] of the sockets pid holds in the listening state:
    ("unix", path) or ("tcp", (host, port)) / ("tcp6", (host, port))."""
    inodes = _socket_inodes(pid)
    out = []
    with open(f"/proc/{pid}/net/unix") as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            if len(parts) >= 7 and int(parts[6]) in inodes and int(parts[3], 16) & SO_ACCEPTCON:
                out.append(("unix", parts[7] if len(parts) > 7 else ""))
    for fam in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{fam}") as f:
                lines = f.readlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            parts = line.split()
            if int(parts[9]) in inodes and parts[3] == TCP_LISTEN:
                out.append((fam, _tcp_addr(parts[1])))
    return out


def cli_prefix(bus):
    """The profile's command line up to --config: how to run the daemon with
    a command line of our own."""
    argv = bus.profile.argv("stdio", daemon=bus.ctx.daemon, config="CONFIG", socket="",
                            host="", port="")
    if "--config" not in argv:
        pytest.skip("unsupported: the profile's command does not pass --config")
    return argv[:argv.index("--config")]


def run_cli(bus, args, timeout=None):
    """Runs the daemon with `args` after the profile's prefix; stdin is
    /dev/null. Returns (status, stdout, stderr). A daemon still running at the
    deadline is killed and the test fails."""
    return run_argv(bus, cli_prefix(bus) + [str(a) for a in args], timeout)


def profile_cli(bus, config, modes=("stdio",), extra=(), sock="", address=None):
    """A command line built from the profile, never from our CLI: its
    command and extra_args with `config` for {config} (None: the config
    argument left out, with its option when that is an argument of its
    own), the flags of each mode in `modes` in turn for {mode_flag}
    (`address` replaces "{host}:{port}" in the tcp flags), then `extra`.
    Unsupported when the profile cannot express it."""
    p = bus.profile
    template = list(p.command) + list(p.extra_args)
    if not any("{config}" in a for a in template):
        pytest.skip("unsupported: the profile's command has no {config}")
    flags = []
    for mode in modes:
        f = list(p.mode_flags.get(mode, []))
        if not f and len(modes) > 1:
            pytest.skip(f"unsupported: the profile gives {mode} mode no flag of its own")
        if mode == "tcp" and address is not None:
            if not any("{host}:{port}" in a for a in f):
                pytest.skip("unsupported: the profile's tcp flags do not take one host:port argument")
            f = [a.replace("{host}:{port}", address) for a in f]
        flags += f
    values = {"daemon": bus.ctx.daemon, "config": str(config), "socket": sock, "host": p.host, "port": "0"}
    out = []
    for i, arg in enumerate(template):
        if arg == "{mode_flag}":
            out += [re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], a) for a in flags]
        elif "{config}" in arg and config is None:
            if arg == "{config}" and out and out[-1].startswith("-") and i > 0 and "{" not in template[i - 1]:
                out.pop()  # its option, e.g. --config
        else:
            out.append(re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], arg))
    return out + [str(a) for a in extra]


def run_argv(bus, argv, timeout=None, bound=None):
    """Runs argv (stdin /dev/null): (status, stdout, stderr); a daemon still
    running at the deadline, or once bound shows it will not exit (see
    evidence.py), is killed and the test fails."""
    timeout = wait_timeout() if timeout is None else timeout
    t0, seen = time.monotonic(), []

    def noted():
        try:
            evidence.run(bound)
        except NeverComes as exc:
            seen.append(f"; {exc}")
            raise
    rc, out, err, _ = bus.run(argv, timeout, bound=noted if bound else None)  # its session killed afterwards
    if rc is None:
        raise AssertionError(f"{' '.join(argv)}: still running after {time.monotonic() - t0:.1f} s"
                             f"{''.join(seen)} (stderr: {err[-500:]!r})")
    return rc, out, err


def valid_config_file(bus, name="ok.json"):
    """A valid configuration whose pool logs to <workdir>/p.log."""
    from stdio_bus_conformance.daemon import config as cfg
    return cfg.write_config(bus.workdir / name, bus.config())


def assert_refused_to_start(bus, rc, out, err, needle=None):
    """SB-I-33: reason on stderr, nothing on stdout, no worker, non-zero exit."""
    assert rc > 0, f"exit status {rc}: expected a non-zero exit (negative: killed by a signal)"
    assert out == b"", f"the daemon wrote to stdout: {out[:200]!r}"
    assert err.strip(), "the daemon gave no reason on stderr"
    if needle is not None:
        assert needle.lower().encode() in err.lower(), f"stderr does not name {needle!r}: {err[-500:]!r}"
    assert bus.worker_log("p").pids() == [], "the daemon spawned workers before refusing to start"


# -- 4.1.1 operating modes ----------------------------------------------------------
@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-4.1.1-1", "SB-4.1.2-1", "SB-3.1-3")
def test_stdio_mode_serves_one_client_on_stdin_and_stdout(bus):
    d = bus.start(instances=2)
    c = bus.client()
    for i in range(4):
        assert c.request(session=f"s{i % 2}")["result"]["method"] == "echo"
    check("SB-4.1.2-1", listening_sockets(d.pid) == [],
          lambda: f"stdio mode holds a listening socket, so it accepts other clients: {listening_sockets(d.pid)}")
    # nothing but the stdio client: no TCP connection either. Unix socket pairs are the
    # daemon's own business (a self-pipe, its workers' channels: SB-3.3-1 judges those)
    check("SB-4.1.2-1", tcp_sockets(d.pid) == set(), "stdio mode holds TCP sockets besides its stdin/stdout")


@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-4.1.1-2", "SB-4.1.2-1")
def test_no_mode_flag_means_stdio(bus):
    flags = dict(bus.profile.mode_flags, stdio=[])  # {mode_flag} expands to nothing
    bus.profile = dataclasses.replace(bus.profile, mode_flags=flags)
    d = bus.start(instances=1)
    assert not any(a in ("--stdio", "--unix", "--tcp") for a in d.argv), d.argv
    c = bus.client()
    assert c.request(session="s")["sessionId"] == "s"
    assert listening_sockets(d.pid) == []


@pytest.mark.modes("unix")
@pytest.mark.clause("SB-4.1.1-3", "SB-3.1-3", "SB-4.1.2-2")
def test_unix_mode_listens_on_the_path_and_serves_every_client(bus):
    d = bus.start(instances=2)
    st = os.lstat(d.socket_path)
    assert stat.S_ISSOCK(st.st_mode), f"{d.socket_path} is not a socket"
    socks = listening_sockets(d.pid)
    assert ("unix", d.socket_path) in socks, f"no listening socket on {d.socket_path}: {socks}"
    # the one mode chosen, no other way in besides it
    check("SB-3.1-3", socks == [("unix", d.socket_path)],
          f"expected exactly one listening socket, the unix one: {socks}")
    first = bus.client()  # a client connecting to it is served
    assert first.request(session="first")["sessionId"] == "first"
    first.close()
    # many at once (SB-4.1.2-2): each sends before any is answered
    clients = [bus.client() for _ in range(6)]
    for i, c in enumerate(clients):
        c.send_json({"jsonrpc": "2.0", "id": f"u{i}", "method": "echo", "sessionId": f"s{i}"})
    with checking("SB-4.1.2-2"):
        for i, c in enumerate(clients):
            assert c.recv_response(f"u{i}")["sessionId"] == f"s{i}"


@pytest.mark.modes("tcp")
@pytest.mark.clause("SB-4.1.1-4", "SB-3.1-3", "SB-4.1.2-2", "SB-I-22")
def test_tcp_mode_listens_on_host_and_port_and_serves_every_client(bus):
    d = bus.start(instances=2)
    socks = listening_sockets(d.pid)
    assert len(socks) == 1 and socks[0][1][1] == d.port, \
        f"expected exactly one listening socket, on port {d.port}: {socks}"
    check("SB-I-22", socks[0] == ("tcp", (d.host, d.port)),
          f"it listens on {socks[0][1]}, not on exactly the host given ({d.host})")
    first = bus.client()  # a client connecting to it is served
    assert first.request(session="first")["sessionId"] == "first"
    first.close()
    # many at once (SB-4.1.2-2): each sends before any is answered
    clients = [bus.client() for _ in range(6)]
    for i, c in enumerate(clients):
        c.send_json({"jsonrpc": "2.0", "id": f"t{i}", "method": "echo", "sessionId": f"s{i}"})
    with checking("SB-4.1.2-2"):
        for i, c in enumerate(clients):
            assert c.recv_response(f"t{i}")["sessionId"] == f"s{i}"


# -- SB-I-22 socket details -------------------------------------------------------
@pytest.mark.modes("tcp")
@pytest.mark.clause("SB-I-22", "SB-4.1.1-4")
def test_tcp_binds_exactly_the_host_given(bus):
    d = bus.start(instances=1)
    # Linux routes all of 127.0.0.0/8 to lo: a daemon bound to all interfaces,
    # or to the whole of lo, would accept on 127.0.0.2 too.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        with pytest.raises(ConnectionRefusedError):
            s.connect(("127.0.0.2", d.port))
    assert bus.client().request()["result"]["method"] == "echo"


def _ipv6_loopback():
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def bracketed_host(flags):
    """The profile's tcp flags with an IPv6 host in brackets where host and
    port are written together ("{host}:{port}", as in the spec's --tcp
    <host:port>); a host given in an argument of its own stays bare. The
    profile's own flags, never ours: a daemon's CLI is its profile's."""
    return [a.replace("{host}:{port}", "[{host}]:{port}") for a in flags]


@pytest.mark.modes("tcp")
@pytest.mark.clause("SB-I-22", "SB-4.1.1-4")
def test_tcp_accepts_a_bracketed_ipv6_literal(bus):
    if not _ipv6_loopback():
        pytest.skip("no IPv6 loopback on this machine")
    bus.profile = dataclasses.replace(bus.profile, host="::1", mode_flags=dict(
        bus.profile.mode_flags, tcp=bracketed_host(bus.profile.mode_flags["tcp"])))
    d = bus.start(instances=1)
    assert listening_sockets(d.pid) == [("tcp6", ("::1", d.port))], listening_sockets(d.pid)
    assert bus.client().request(session="v6")["sessionId"] == "v6"


@pytest.mark.modes("unix")
@pytest.mark.clause("SB-I-22")
def test_unix_socket_file_is_private_and_removed_at_exit(bus):
    d = bus.start(instances=1)
    mode = stat.S_IMODE(os.lstat(d.socket_path).st_mode)
    assert mode & 0o077 == 0, f"socket file mode {mode:04o}: group or others may connect"
    assert bus.client().request()["result"]["method"] == "echo"
    d.signal(signal.SIGTERM)
    assert d.wait_exit() == 0
    assert not os.path.lexists(d.socket_path), "the socket file is left behind after exit"


@pytest.mark.modes("unix")
@pytest.mark.clause("SB-I-22", "SB-4.1.1-3")
def test_stale_socket_file_is_replaced(bus):
    stale = str(bus.workdir / "bus.sock")  # where the daemon will listen
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(stale)
    s.close()  # the file stays, nobody accepts on it: a dead daemon's leftover
    d = bus.start(instances=1)
    assert d.socket_path == stale
    assert bus.client().request(session="s")["sessionId"] == "s"


@pytest.mark.modes("unix")
@pytest.mark.clause("SB-I-22")
def test_live_daemon_on_the_path_is_not_displaced(bus):
    first = bus.start(instances=1)
    old = bus.client()
    old.request(session="kept")
    # same workdir, so the same socket path; its own pool, so its own log
    try:
        second = bus.start(pools=[bus.pool("q", 1)], wait_workers=False)
    except DaemonExited:
        second = bus.daemon
    assert second.wait_exit() > 0, "a second daemon started on a path a live daemon listens on"
    try:
        second.wait_stderr(r"\S", timeout=2)
    except DaemonTimeout:
        raise AssertionError("the second daemon gave no reason on stderr") from None
    assert first.running
    assert os.path.lexists(first.socket_path), "the second daemon removed the first one's socket"
    assert first.client().request(session="new")["sessionId"] == "new"
    assert old.request(session="kept")["sessionId"] == "kept"


# -- 4.1.2 connection lifecycle -------------------------------------------------------
@pytest.mark.clause("SB-4.1.2-3")
def test_idle_client_and_discarded_messages_do_not_close_the_connection(bus):
    bus.start(instances=1)
    c = bus.client()
    c.request(session="s")
    # a client response that answers no request is discarded (SB-I-14), the client stays
    c.send(b'{"jsonrpc":"2.0","id":"nobody-asked","result":{}}\n')
    assert c.sync(session="s") == []
    # no idle timeout: a short silence (bounded; the suite must stay fast) changes nothing
    c.expect_silence(0.5)
    assert c.request(session="s")["sessionId"] == "s"


@pytest.mark.long_wait
@pytest.mark.timeout(120)
@pytest.mark.modes("tcp")
@pytest.mark.clause("SB-4.1.2-3")
def test_client_idle_far_longer_than_any_other_wait_stays_connected(bus):
    # No idle timeout: the client says nothing for several times the longest
    # wait elsewhere in the suite (a wait deadline, a drain of a few seconds),
    # so an idle timeout short enough to pass every other test fails here.
    # Marked long_wait: it starts first and its wait overlaps the rest.
    idle = max(30.0, 6 * wait_timeout())
    bus.start(instances=1)
    c = bus.client()
    c.request(session="s")
    try:
        c.expect_closed(timeout=idle)  # ends at once if the daemon closes it
    except DaemonTimeout:
        pass
    else:
        raise AssertionError(f"the daemon closed a client that was idle for less than {idle:g} s")
    assert c.request(session="s")["sessionId"] == "s", "the idle client's session was lost"


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-4.1.2-3", "SB-I-4")
def test_message_for_a_foreign_session_does_not_close_the_client(bus):
    # Whether the line is routed (seed 6.1.2) or discarded (SB-I-4), it is
    # well formed: the client stays connected.
    bus.start(instances=2)
    owner, other = bus.client(), bus.client()
    owner.request(session="owned")
    other.send_json({"jsonrpc": "2.0", "id": "intruder", "method": "x", "sessionId": "owned"})
    other.sync()  # the daemon has read the line
    owner.request(session="owned")  # behind it on the session's worker: all it wrote is routed
    lines = other.sync()
    assert not other.closed_by_daemon
    assert other.request(session="its-own")["sessionId"] == "its-own"
    with checking("SB-I-4"):
        assert not any(b'"intruder"' in x for x in lines + other.received), \
            "the intruder got an answer for a session it does not own"


# -- SB-I-33 command-line errors ----------------------------------------------------------
# These tests run their own command lines; the mode fixture plays no part.
@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-I-33", "SB-9.1-1")
def test_no_config_flag_is_refused(bus):
    rc, out, err = run_argv(bus, profile_cli(bus, None))
    assert_refused_to_start(bus, rc, out, err, "config")


@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-I-33", "SB-9.1-1", "SB-I-20")
@pytest.mark.parametrize("what", ["missing", "directory"])
def test_unreadable_config_file_is_refused(bus, what):
    path = bus.workdir / "nothing-here.json" if what == "missing" else bus.workdir
    rc, out, err = run_argv(bus, profile_cli(bus, path))
    assert_refused_to_start(bus, rc, out, err)


@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-I-33")
def test_unknown_option_is_refused(bus):
    rc, out, err = run_argv(bus, profile_cli(bus, valid_config_file(bus), extra=["--frobnicate"]))
    assert_refused_to_start(bus, rc, out, err, "--frobnicate")


@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-I-33", "SB-3.1-3")
@pytest.mark.parametrize("modes", [("stdio", "unix"), ("unix", "tcp"), ("tcp", "stdio")],
                         ids=["stdio+unix", "unix+tcp", "tcp+stdio"])
def test_two_mode_flags_are_refused(bus, modes):
    sock = str(bus.workdir / "two.sock")
    rc, out, err = run_argv(bus, profile_cli(bus, valid_config_file(bus), modes, sock=sock))
    assert_refused_to_start(bus, rc, out, err)
    assert not os.path.lexists(sock), "the daemon created the socket file before refusing to start"


@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-I-33", "SB-I-22")
@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.1:", "127.0.0.1:99999", "::1:8080", "[::1]8080", ":8080"],
                         ids=["no-port", "empty-port", "port-range", "bare-v6", "v6-no-colon", "no-host"])
def test_malformed_tcp_address_is_refused(bus, address):
    # a daemon that started a worker took the address (assert_refused_to_start fails it anyway)
    rc, out, err = run_argv(bus, profile_cli(bus, valid_config_file(bus), ("tcp",), address=address),
                            bound=evidence.worker_started(bus.worker_log("p")))
    assert_refused_to_start(bus, rc, out, err)


# -- extensions: --help, --version, --log-level -------------------------------------------
@pytest.mark.modes("stdio")
@pytest.mark.requires("cli_help")
@pytest.mark.clause("SB-X-1")
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_usage_without_a_config(bus, flag):
    rc, out, err = run_cli(bus, [flag])
    assert rc == 0, f"exit status {rc}; stderr {err[-300:]!r}"
    assert b"usage" in out.lower() and b"--config" in out, f"no usage on stdout: {out[:300]!r}"
    assert bus.worker_log("p").pids() == []


@pytest.mark.modes("stdio")
@pytest.mark.requires("cli_version")
@pytest.mark.clause("SB-X-2")
def test_version_prints_name_and_version(bus):
    rc, out, err = run_cli(bus, ["--version"])
    assert rc == 0, f"exit status {rc}; stderr {err[-300:]!r}"
    # one line: the name, the version, then anything the daemon adds (ours: the spec revision)
    assert re.fullmatch(rb"\S+ v?\d+\.\d+\.\d+\S*( [^\n]*)?\n", out), \
        f"not '<name> <version>': {out!r}"


@pytest.mark.modes("stdio")
@pytest.mark.requires("log_level")
@pytest.mark.clause("SB-X-3", "SB-I-33")
def test_unknown_log_level_is_refused(bus):
    rc, out, err = run_cli(bus, ["--config", valid_config_file(bus), "--stdio", "--log-level", "loud"])
    assert_refused_to_start(bus, rc, out, err, "loud")


LEVEL_RE = re.compile(r"\b(DEBUG|INFO|WARN|WARNING|ERROR)\b")
EXPECTED_LEVELS = {
    None: {"INFO", "WARN", "ERROR"},
    "debug": {"DEBUG", "INFO", "WARN", "ERROR"},
    "info": {"INFO", "WARN", "ERROR"},
    "warn": {"WARN", "ERROR"},
    "error": {"ERROR"},
}


@pytest.mark.requires("log_level")
@pytest.mark.clause("SB-X-3", "SB-I-34")
@pytest.mark.parametrize("level", [None, "debug", "info", "warn", "error"],
                         ids=["default", "debug", "info", "warn", "error"])
def test_log_level_drops_lower_levels(bus, level):
    if level is not None:
        bus.profile = dataclasses.replace(bus.profile,
                                          extra_args=list(bus.profile.extra_args) + ["--log-level", level])
    d = bus.start(instances=1)
    c = bus.client()
    c.request(session="s")  # INFO (connections, spawns) and DEBUG (routing) material
    c.send_json({"jsonrpc": "2.0", "id": "w", "method": "x", "sessionId": "s",
                 "params": {"mock": {"reply_id": "nobody"}}})  # a warning (SB-6.3.1-4)
    c.sync(session="s")
    c.send_json({"jsonrpc": "2.0", "id": "e", "method": "x", "sessionId": "s",
                 "params": {"mock": {"emit": "this is not json\n"}}})  # an error (SB-5.3-1)
    d.wait_stderr(r"\bERROR\b")
    d.signal(signal.SIGTERM)
    assert d.wait_exit() == 0
    seen = set()
    for line in d.stderr_lines():
        m = LEVEL_RE.search(line)
        if m:
            seen.add("WARN" if m.group(1) == "WARNING" else m.group(1))
    assert seen == EXPECTED_LEVELS[level], f"levels logged: {sorted(seen)}"
