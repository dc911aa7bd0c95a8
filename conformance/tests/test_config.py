"""Configuration (spec 9, SB-I-20): the file named by --config is read, a
bad one is rejected before anything is spawned or served, optional parts
take their defaults, and what is configured is applied."""

import contextlib
import dataclasses
import json
import os
import re
import time

import pytest

from stdio_bus_conformance import ConnectionClosed, DaemonExited, procinfo
from stdio_bus_conformance import check, checking, field, wait_timeout
from stdio_bus_conformance.common.errors import DaemonTimeout
from stdio_bus_conformance.daemon import config as cfg

MIB = 1024 * 1024


# -- local helpers ---------------------------------------------------------------
def expect_rejected(bus, config, needle=None, timeout=None):
    """Starts the daemon on `config` (a dict, or str written verbatim) and
    checks that it refuses it: non-zero exit, a reason on stderr naming
    `needle`, nothing on stdout, no worker spawned (SB-I-20)."""
    timeout = wait_timeout() if timeout is None else timeout
    raw = config if isinstance(config, (str, bytes)) else json.dumps(config)
    try:
        d = bus.start(raw_config=raw)
    except DaemonExited:
        d = bus.daemon  # a socket mode that never listened: what we expect
    # A daemon that accepts the file spawns its workers: fail at once then
    # instead of waiting for a deadline.
    deadline = time.monotonic() + timeout
    while d.proc.poll() is None:
        started = bus.worker_log("p").pids() + bus.worker_log("q").pids()
        assert not started, "the daemon accepted the configuration: it spawned its workers"
        if time.monotonic() >= deadline:
            raise DaemonTimeout(f"the daemon neither exited nor spawned within {timeout:g} s")
        time.sleep(0.005)  # a process exit has no notification we can wait on here: poll
    rc = d.wait_exit(1)
    assert rc > 0, f"exit status {rc}: the daemon did not reject the configuration"
    if bus.mode == "stdio":
        unread = d.client().expect_closed()
        out = b"".join(d.client().received) + b"".join(unread)
    else:
        out = d.stdout_bytes()
    assert out == b"", f"the daemon wrote to stdout: {out[:200]!r}"
    for pool in ("p", "q"):
        assert bus.worker_log(pool).pids() == [], f"the daemon spawned pool {pool} before rejecting"
    # "an error on stderr" (Words), one line naming the field (our SB-I-20, SHOULD);
    # the stderr reader may lag behind the exit: wait for the line, briefly
    try:
        d.wait_stderr(r"\S")
    except DaemonTimeout:
        raise AssertionError("the daemon gave no reason on stderr") from None
    if needle is not None:
        try:
            d.wait_stderr(re.escape(needle))
        except DaemonTimeout:
            check("SB-I-20", False, f"stderr does not name {needle!r}: {d.stderr_text()[-600:]!r}")
    return d.stderr_text()


def pool(bus, pool_id="p", instances=1, **over):
    p = bus.pool(pool_id, instances)
    p.update(over)
    return {k: v for k, v in p.items() if v is not None}


def without(d, key):
    return {k: v for k, v in d.items() if k != key}


def worker_children(pid, n, command, timeout=None):
    """Waits until pid has n live children that have exec'd `command`;
    returns their pids."""
    timeout = wait_timeout() if timeout is None else timeout
    deadline = time.monotonic() + timeout
    while True:
        kids = []
        for k in procinfo.live_children(pid):
            try:
                if os.path.basename(procinfo.cmdline(k)[0]) == os.path.basename(command):
                    kids.append(k)
            except (OSError, IndexError):
                continue
        if len(kids) >= n:
            return kids
        if time.monotonic() >= deadline:
            raise DaemonTimeout(f"the daemon has {len(kids)} live children, expected {n}")
        time.sleep(0.005)  # /proc has no change notification: poll until the deadline


# -- 9.1 the file named by --config ---------------------------------------------------
@pytest.mark.clause("SB-9.1-1", "SB-3.1-1")
def test_config_is_read_from_the_file_named_by_the_flag(bus):
    # The daemon's working directory holds the harness's own config.json (pool
    # "p"); the file named on the command line is elsewhere and says otherwise.
    other = bus.workdir / "conf dir" / "my bus.json"
    other.parent.mkdir()
    # a limit of its own too: the daemon runs with what it read (SB-3.1-1)
    cfg.write_config(other, {"pools": [bus.pool("named", 3)],
                             "limits": dict(cfg.BASE_LIMITS, max_input_buffer=4096)})
    command = [str(other) if a == "{config}" else a for a in bus.profile.command]
    if command == list(bus.profile.command):
        pytest.skip("unsupported: the profile's command has no {config} argument")
    bus.profile = dataclasses.replace(bus.profile, command=command)
    bus.start(wait_workers=False)
    log = bus.worker_log("named")
    log.wait_count(lambda r: r.kind == "start", 3, what="'start' of the 3 workers of pool named")
    c = bus.client()
    assert len({field(c.request(), "result", "pid") for _ in range(6)}) == 3
    assert bus.worker_log("p").pids() == [], "the daemon ran the pool of a file it was not given"
    # a line over the file's max_input_buffer (the default is 1 MiB) is not served
    c.send(json.dumps({"jsonrpc": "2.0", "id": "over", "method": "echo", "params": {"pad": "x" * 6000}}).encode()
           + b"\n")
    try:
        served = c.recv_response("over") is not None
    except ConnectionClosed:
        served = False
    check("SB-3.1-1", not served, "a 6000-byte line was served: the file's max_input_buffer of 4096 was not applied")


@pytest.mark.clause("SB-I-20")
@pytest.mark.parametrize("text", [
    '{"pools": [POOL], // the spec\'s schema carries remarks; the file may not\n "limits": {}}',
    '{"pools": [POOL,], "limits": {}}',
    '{"pools": [POOL]} trailing',
], ids=["comment", "trailing-comma", "trailing-garbage"])
def test_config_must_be_strict_json(bus, text):
    expect_rejected(bus, text.replace("POOL", json.dumps(pool(bus))))


# -- 9.2 / 9.3 rejected configurations ----------------------------------------------------
def _cases(bus):
    ok = pool(bus)
    return {
        # SB-9.2-1
        "no-id": ({"pools": [without(ok, "id")]}, "id"),
        "id-not-string": ({"pools": [dict(ok, id=7)]}, "id"),
        "second-pool-no-id": ({"pools": [ok, without(pool(bus, "q"), "id")]}, "id"),
        # SB-9.2-2
        "no-command": ({"pools": [without(ok, "command")]}, "command"),
        "command-not-string": ({"pools": [dict(ok, command=[ok["command"]])]}, "command"),
        # SB-9.2-4
        "no-instances": ({"pools": [without(ok, "instances")]}, "instances"),
        "instances-string": ({"pools": [dict(ok, instances="2")]}, "instances"),
        "instances-null": ({"pools": [dict(ok, instances=None)]}, "instances"),
        # SB-9.3-1
        "no-pools": ({"limits": {}}, "pools"),
        "empty-pools": ({"pools": []}, "pools"),
        "pools-not-array": ({"pools": ok}, "pools"),
        # SB-9.3-2
        "duplicate-id": ({"pools": [ok, pool(bus, "q", id="p")]}, "p"),
        # SB-9.3-3
        "command-missing": ({"pools": [dict(ok, command=str(bus.workdir / "no-such-worker"))]}, "command"),
        "command-directory": ({"pools": [dict(ok, command=str(bus.workdir))]}, "command"),
        "command-not-executable": ({"pools": [dict(ok, command=str(bus.workdir / "plain.txt"))]}, "command"),
        "command-not-on-path": ({"pools": [dict(ok, command="no-such-stdio-bus-worker")]}, "command"),
        "second-pool-bad-command": ({"pools": [ok, pool(bus, "q", command="/nonexistent/w")]}, "command"),
        # SB-9.3-4
        "instances-zero": ({"pools": [dict(ok, instances=0)]}, "instances"),
        "instances-negative": ({"pools": [dict(ok, instances=-1)]}, "instances"),
        "instances-fraction": ({"pools": [dict(ok, instances=1.5)]}, "instances"),
        "second-pool-instances-zero": ({"pools": [ok, pool(bus, "q", instances=0)]}, "instances"),
        # SB-I-20
        "args-not-array": ({"pools": [dict(ok, args="--log x")]}, "args"),
        "args-not-strings": ({"pools": [dict(ok, args=["--delay-ms", 5])]}, "args"),
        "limits-not-object": ({"pools": [ok], "limits": 5}, "limits"),
        "limit-string": ({"pools": [ok], "limits": {"max_input_buffer": "1MB"}}, "max_input_buffer"),
        "limit-zero": ({"pools": [ok], "limits": {"drain_timeout_sec": 0}}, "drain_timeout_sec"),
        "limit-fraction": ({"pools": [ok], "limits": {"backpressure_timeout_sec": 1.5}}, "backpressure_timeout_sec"),
        "max-restarts-negative": ({"pools": [ok], "limits": {"max_restarts": -1}}, "max_restarts"),
        "top-level-array": ([{"pools": [ok]}], None),
    }


def _rejection_test(clauses, names):
    @pytest.mark.clause(*clauses)
    @pytest.mark.parametrize("case", names)
    def test(bus, case):
        (bus.workdir / "plain.txt").write_text("not a program\n")
        config, needle = _cases(bus)[case]
        expect_rejected(bus, config, needle)
    return test


test_pool_without_id_string_is_rejected = _rejection_test(
    ("SB-9.2-1", "SB-I-20"), ["no-id", "id-not-string", "second-pool-no-id"])
test_pool_without_command_string_is_rejected = _rejection_test(
    ("SB-9.2-2", "SB-I-20"), ["no-command", "command-not-string"])
test_pool_without_numeric_instances_is_rejected = _rejection_test(
    ("SB-9.2-4", "SB-I-20"), ["no-instances", "instances-string", "instances-null"])
test_missing_or_empty_pools_is_rejected = _rejection_test(
    ("SB-9.3-1", "SB-I-20"), ["no-pools", "empty-pools", "pools-not-array"])
test_duplicate_pool_ids_are_rejected = _rejection_test(
    ("SB-9.3-2", "SB-I-20"), ["duplicate-id"])
test_invalid_command_path_is_rejected = _rejection_test(
    ("SB-9.3-3", "SB-I-20"), ["command-missing", "command-directory", "command-not-executable",
                              "command-not-on-path", "second-pool-bad-command"])
test_instances_below_one_are_rejected = _rejection_test(
    ("SB-9.3-4", "SB-I-20"), ["instances-zero", "instances-negative", "instances-fraction",
                              "second-pool-instances-zero"])
test_badly_typed_values_are_rejected = _rejection_test(
    ("SB-I-20",), ["args-not-array", "args-not-strings", "limits-not-object", "limit-string", "limit-zero",
                   "limit-fraction", "max-restarts-negative", "top-level-array"])


# -- accepted configurations ---------------------------------------------------------------
@pytest.mark.clause("SB-I-20", "SB-I-34")
def test_unknown_keys_are_ignored_with_a_warning(bus):
    p = dict(pool(bus, "p", 2), weight_zz=3)
    d = bus.start({"pools": [p], "tuning_zz": {"x": 1}, "limits": {"turbo_zz": True}})
    c = bus.client()
    assert c.request(session="s")["sessionId"] == "s"
    lines = d.stderr_lines()
    for key in ("weight_zz", "tuning_zz", "turbo_zz"):
        assert any(key in line for line in lines), f"no line names the unknown key {key}"
    with checking("SB-I-34"):  # the level word is SB-I-34's alone
        warned = [line for line in lines if "WARN" in line.upper()]
        for key in ("weight_zz", "tuning_zz", "turbo_zz"):
            assert any(key in line for line in warned), f"the line naming {key} is not at WARN level"


@pytest.mark.clause("SB-I-20", "SB-9.3-3")
def test_bare_command_name_is_found_on_path(bus):
    mock = bus.pool()["command"]
    env = dict(bus.profile.env)
    env["PATH"] = os.path.dirname(mock) + os.pathsep + env.get("PATH", os.environ.get("PATH", ""))
    bus.profile = dataclasses.replace(bus.profile, env=env)
    bus.start({"pools": [pool(bus, "p", 2, command=os.path.basename(mock))]})
    assert bus.client().request(session="s")["sessionId"] == "s"


def argv_seen(bus, pool, n):
    """What each of a pool's `n` first workers saw as its argv, from its own
    log (the mock's `start` record: its argv joined by single spaces), not
    from /proc of the daemon's children: a daemon may start its workers
    through a shell or a wrapper."""
    log = bus.worker_log(pool)
    log.wait_count(lambda r: r.kind == "start", n, what="'start' of every worker")
    return {r.pid: r.raw.decode("utf-8", "replace") for r in log.select("start")[:n]}


@pytest.mark.clause("SB-9.2-3", "SB-3.1-2")
def test_args_are_passed_in_order(bus):
    # a double space and a non-ASCII letter inside one argument: a daemon
    # that joins and re-splits the args, or quotes them, changes what the
    # worker sees
    args = bus.pool("p")["args"] + ["--session", "two  words \u00e9", "--delay-ms", "0", "--split", "1"]
    bus.start({"pools": [pool(bus, "p", 2, args=args)]})
    command = bus.pool()["command"]
    for pid, seen in argv_seen(bus, "p", 2).items():
        want = " ".join([command] + args)
        assert seen == want or (seen.endswith(" " + " ".join(args)) and
                                os.path.basename(seen[:-len(" ".join(args)) - 1]) == os.path.basename(command)), \
            f"worker {pid} saw argv {seen!r}, configured {command!r} + {args}"


@pytest.mark.clause("SB-9.2-3", "SB-3.1-2")
def test_no_args_when_args_is_omitted(bus):
    bare = {"id": "p", "command": bus.pool()["command"], "instances": 2}  # no --log: no args at all
    d = bus.start({"pools": [bare]})
    kids = worker_children(d.pid, 2, bus.pool()["command"])
    for pid in kids:
        assert procinfo.cmdline(pid)[1:] == [], f"worker {pid} got arguments {procinfo.cmdline(pid)[1:]}"
    assert field(bus.client().request(), "result", "pid") in kids


# -- 9.2 limits are applied; 9.3 defaults when omitted ------------------------------------------
@pytest.mark.clause("SB-9.2-5", "SB-8.3-1", "SB-I-16")
def test_configured_max_input_buffer_is_applied(bus):
    limit = 4096
    bus.start({"limits": {"max_input_buffer": limit}}, instances=1)
    c = bus.client()
    head = b'{"jsonrpc":"2.0","method":"fits","params":"'
    fits = head + b"x" * (limit - len(head) - 3) + b'"}\n'
    assert len(fits) == limit
    c.send(fits)
    assert bus.worker_log().wait_received(b'"method":"fits"').line == fits
    assert c.sync() == []
    # limit + 1 bytes and the newline: over the cap however the newline counts
    over = fits.replace(b'"fits"', b'"over"').replace(b'"}', b'xx"}')
    assert len(over) == limit + 2
    try:
        c.send(over)
    except ConnectionClosed:
        pass  # closed as soon as max_input_buffer bytes had no newline: fine
    c.expect_closed()
    assert not any(b'"over"' in line for line in bus.worker_log().received())


@pytest.mark.stands_on("full-pipe")  # it writes to a worker faster than the worker reads
@pytest.mark.clause("SB-8.1-7")
@pytest.mark.parametrize("limits", [
    pytest.param(None, marks=pytest.mark.clause("SB-9.3-5"), id="limits-omitted"),
    pytest.param({"drain_timeout_sec": 2}, marks=pytest.mark.clause("SB-9.3-6"), id="field-omitted"),
])
def test_default_max_input_buffer_applies_when_not_configured(bus, limits):
    config = {"pools": [pool(bus, "p", 1)]}
    if limits is not None:
        config["limits"] = limits
    bus.start(raw_config=json.dumps(config))
    bus.worker_log().wait_count(lambda r: r.kind == "start", 1, what="'start' of the worker")
    # with no limits object at all, what is observed is 9.3-5's "the defaults of 8.1 are used"
    with checking("SB-9.3-5") if limits is None else contextlib.nullcontext():
        c = bus.client()
        head = b'{"jsonrpc":"2.0","method":"fits","params":"'
        fits = head + b"x" * (MIB - len(head) - 3) + b'"}\n'
        assert len(fits) == MIB
        c.send(fits, timeout=2 * wait_timeout())
        assert c.sync(timeout=2 * wait_timeout()) == []
        assert bus.worker_log().wait_received(b'"method":"fits"').line == fits
        over = fits.replace(b'"fits"', b'"over"').replace(b'"}', b'xx"}')  # 1 MiB + 1 and the newline
        try:
            c.send(over, timeout=2 * wait_timeout())
        except ConnectionClosed:
            pass  # closed as soon as max_input_buffer bytes had no newline: fine
        c.expect_closed(timeout=2 * wait_timeout())
        assert not any(b'"over"' in line for line in bus.worker_log().received())


def assert_starts_settle_at(bus, pool_id, n, window=0.2):
    """Waits for n starts of the pool's (crash-looping) worker, then watches
    for `window` s, many times the configured backoff, that no further start
    comes but one: "stop restarting if max_restarts is exceeded" lets a
    daemon that stops once the count has gone over restart once more. The
    exact count is SB-I-10's. Proving that something does not happen needs
    a bounded look."""
    log = bus.worker_log(pool_id)
    log.wait_count(lambda r: r.kind == "start", n, what=f"'start' of pool {pool_id}")
    deadline = time.monotonic() + window
    while time.monotonic() < deadline:
        starts = len(log.pids())
        assert starts <= n + 1, f"{starts} starts of the crashing worker, expected {n}"
        time.sleep(0.01)  # bounded observation window, see the docstring
    check("SB-I-10", len(log.pids()) == n, f"{len(log.pids())} starts of the crashing worker, expected exactly {n}")
    bus.client().sync()  # and the daemon still serves with the other pool


@pytest.mark.requires("restart_backoff")
@pytest.mark.stands_on("restart-crash")
@pytest.mark.clause("SB-9.2-5", "SB-8.3-3", "SB-I-10")
@pytest.mark.parametrize("max_restarts", [0, 2])
def test_configured_max_restarts_is_applied(bus, max_restarts):
    crash = bus.pool("q", 1, args=["--mode", "crash", "--crash-after-ms", "0"])
    bus.start({"limits": {"max_restarts": max_restarts, "restart_backoff_ms": 1,
                          "restart_backoff_max_ms": 2}},
              pools=[bus.pool("p", 1), crash])
    assert_starts_settle_at(bus, "q", 1 + max_restarts)


@pytest.mark.requires("restart_backoff")
@pytest.mark.stands_on("restart-crash")
@pytest.mark.clause("SB-9.3-6", "SB-8.1-3", "SB-I-10")
def test_default_max_restarts_applies_when_the_field_is_omitted(bus):
    crash = bus.pool("q", 1, args=["--mode", "crash", "--crash-after-ms", "0"])
    # limits given, max_restarts not among them: 5 restarts (8.1)
    bus.start({"limits": {"restart_backoff_ms": 1, "restart_backoff_max_ms": 2}},
              pools=[bus.pool("p", 1), crash])
    assert_starts_settle_at(bus, "q", 1 + 5)
