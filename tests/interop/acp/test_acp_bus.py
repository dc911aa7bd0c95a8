"""ACP agents through the stdio Bus daemon (issue 23): the pinned, unmodified
ACP TypeScript SDK on both ends (agent.mjs, and the editor-side client.mjs
on editor.mjs), through the daemon in stdio, unix and TCP modes with one and
four concurrent clients, compared field by field with the same client
spawning the agent itself.

    /usr/bin/python3 -m pytest tests/interop/acp      # after `npm ci` in tests/interop/acp
    ctest --test-dir build -L interop                 # the same, as the ctest interop.acp

Pools: `"spawn": "per_connection"` and `"affinity": "connection"` (SPEC.md
SB-X-10..SB-X-16) must give each client what the direct run gives it. The
spec's default pool is pinned as broken (routing by `sessionId` at the top
level only, 6.1.3 and 6.3.3: ACP's sessionId is inside params). Closing
mid-turn, reconnecting at once, churn and idle-first binding are issue 23
items 1 and 2 (SB-X-19..SB-X-21: a client's end reaching its agent at once,
no client waiting on another's leftovers).
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
DAEMON = Path(os.environ.get("STDIO_BUS") or ROOT / "build" / "stdio_bus").resolve()
NODE = shutil.which("node") or "node"
SDK = HERE / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"
AGENT = [NODE, str(HERE / "agent.mjs")]
WAIT_S = 120  # bound of one client run (a flood of 20,000 updates on 2 shared cores)
BIG = 8 * 1024 * 1024  # max_input_buffer for whole files in one message (the SDK's own limit is 32 MiB)

MODES = ("stdio", "unix", "tcp")
POOLS = {
    # one agent per client, stopped when it leaves (SB-X-15, SB-X-16)
    "per_connection": lambda k, mode: {"spawn": "per_connection", "instances": 4},
    # a fixed pool, each client bound to one agent (SB-X-11); stdio has a spare one
    "affinity": lambda k, mode: {"affinity": "connection", "instances": 2 if mode == "stdio" else k},
}
# what one connection does, compared with the direct run (client.mjs)
SCENARIOS = ("turns", "flood", "twoSessions", "cancelRunning", "cancel-notification", "cancel-request", "bigFiles")



@pytest.fixture(scope="module", autouse=True)
def installed():
    if not DAEMON.exists():
        pytest.fail(f"{DAEMON}: build the daemon first (or set STDIO_BUS)")
    if SDK.exists() and shutil.which(NODE):
        return
    if os.environ.get("CI"):
        pytest.fail(f"{SDK} not installed: in CI these tests must run (ci/install-deps.sh runs `npm ci` here)")
    pytest.skip(f"{SDK.parent} is absent: run `npm ci` in tests/interop/acp (ci/install-deps.sh does)")


class Bus:
    """One daemon in unix or TCP mode, or the command line of stdio mode (each
    client spawns its own daemon)."""

    def __init__(self, mode, pool, tmp, limits=None):
        self.mode, self.tmp, self.proc, self.err = mode, tmp, None, []
        config = {"pools": [{"id": "acp", "command": NODE, "args": [str(HERE / "agent.mjs")], **pool}],
                  "limits": {"max_input_buffer": BIG, "drain_timeout_sec": 2, **(limits or {})}}
        self.config = tmp / "bus.json"
        self.config.write_text(json.dumps(config))
        self.stderr_file = tmp / "daemon.stderr"

    def __enter__(self):
        if self.mode == "stdio":
            return self
        flag = ["--unix", str(self.tmp / "bus.sock")] if self.mode == "unix" else ["--tcp", "127.0.0.1:0"]
        self.proc = subprocess.Popen([str(DAEMON), "--config", str(self.config), *flag],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        listening = threading.Event()

        def pump():
            for line in self.proc.stderr:
                self.err.append(line)
                if "listening on" in line:
                    listening.set()
            listening.set()

        self.pump = threading.Thread(target=pump, daemon=True)
        self.pump.start()
        assert listening.wait(10) and self.proc.poll() is None, self.stderr()
        m = re.search(r"listening on (unix|tcp):(\S+)", self.stderr())
        self.address = m.group(2) if m.group(1) == "unix" else f"127.0.0.1:{m.group(2).rsplit(':', 1)[1]}"
        return self

    def target(self):
        if self.mode == "stdio":
            return ["--spawn", str(DAEMON), "--config", str(self.config), "--stdio"]
        return [f"--{self.mode}", self.address]

    def stderr(self):
        text = "".join(self.err)
        if self.stderr_file.exists():
            text += self.stderr_file.read_text(errors="replace")
        return text

    def __exit__(self, *exc):
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.pump.join(5)


def run_clients(target, scenario, k, workspace, stderr_file=None, env=None, timeout=WAIT_S):
    """Runs k clients of `scenario` at once; what each observed, normalized."""
    workspace.mkdir(exist_ok=True)
    procs = []
    for n in range(1, k + 1):
        e = {**os.environ, "ACP_WORKSPACE": str(workspace), "ACP_CLIENT": str(n), **(env or {})}
        err = open(stderr_file, "a") if stderr_file else subprocess.DEVNULL
        procs.append(subprocess.Popen([NODE, str(HERE / "client.mjs"), scenario, *target], cwd=HERE, env=e,
                                      stdout=subprocess.PIPE, stderr=err, text=True))
    out = []
    for p in procs:
        try:
            stdout, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        assert p.returncode == 0, f"client of {scenario} exited {p.returncode}\n{stderr_file and Path(stderr_file).read_text()[-4000:]}"
        out.append(normalize(json.loads(stdout), workspace))
    return out


def normalize(result, workspace):
    """Drops what differs by nature (the agent's pid, the workspace path) and
    names sessions by order of appearance: an agent of an affinity pool that
    served a client before numbers its sessions on (ACP session ids are opaque)."""
    text = json.dumps(result).replace(str(workspace), "<ws>")
    text = re.sub(r'"pid": \d+', '"pid": 0', text)
    names = {}
    return json.loads(re.sub(r"session-\d+", lambda m: names.setdefault(m.group(0), f"S{len(names) + 1}"), text))


_direct = {}


def direct(scenario, k, tmp_path):
    """What k clients observe spawning the agent themselves (cached per scenario)."""
    have = _direct.get(scenario, [])
    if len(have) < k:
        _direct[scenario] = run_clients(["--spawn", *AGENT], scenario, 4 if k > 1 else 1, tmp_path / f"direct-{scenario}")
    return _direct[scenario][:k]


def complaints(text):
    """WARN and ERROR lines of the daemon, but for the agents' own stderr."""
    return [l for l in text.splitlines() if re.search(r"\b(WARN|ERROR)\b", l) and "] stderr: " not in l]


# -- the same as spawning the agent ------------------------------------------------------------
@pytest.mark.parametrize("k", (1, 4))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pool", POOLS)
def test_every_field_is_the_same_as_spawning_the_agent(pool, mode, k, tmp_path):
    """Streamed updates (order, count, a flood of 20,000), permission and fs
    requests during a pending prompt, both cancel methods (one while the
    permission request is pending), two sessions on one connection, 2 MiB
    file reads and writes (max_input_buffer 8 MiB): field by field."""
    with Bus(mode, POOLS[pool](k, mode), tmp_path) as bus:
        for scenario in SCENARIOS:
            seen = run_clients(bus.target(), scenario, k, tmp_path / "bus", bus.stderr_file)
            ref = direct(scenario, k, tmp_path)
            for n in range(k):
                assert seen[n] == ref[n], f"client {n + 1}, {scenario}:\n{json.dumps(seen[n])[:3000]}\n--- direct ---\n{json.dumps(ref[n])[:3000]}"
        assert complaints(bus.stderr()) == [], bus.stderr()[-4000:]


def test_the_flood_and_the_files_are_what_was_sent(tmp_path):
    """The reference itself: 20,000 updates in order, the 2 MiB files' bytes."""
    flood, = direct("flood", 1, tmp_path)
    assert flood["count"] == 20000 and flood["firstOutOfOrder"] == -1 and flood["stop"]["stopReason"] == "end_turn"
    files, = direct("bigFiles", 1, tmp_path)
    assert files["read"][0]["bytes"] == files["wrote"][0]["bytes"] == 2 * 1024 * 1024
    assert files["wrote"][0]["sha256"] == files["onDisk"]


# -- closing mid-turn, reconnecting, churn (issue 23 items 1 and 2) -------------------------------
def close_mid_turn(mode, pool, tmp_path, wait_ms=5000, limits=None):
    """Milliseconds from the editor's close (a permission request pending) to
    its agent's exit; None if the agent outlived wait_ms."""
    with Bus(mode, pool, tmp_path, limits) as bus:
        r, = run_clients(bus.target(), "closeMidTurn", 1, tmp_path / "bus", bus.stderr_file,
                         env={"ACP_CLOSE_WAIT_MS": str(wait_ms)})
    return r["exitMs"]


def test_closing_mid_turn_ends_a_directly_spawned_agent(tmp_path):
    """The reference of the tests below: the agent sees the end of its input and exits."""
    r, = run_clients(["--spawn", *AGENT], "closeMidTurn", 1, tmp_path / "direct", env={"ACP_CLOSE_WAIT_MS": "10000"})
    assert r["exitMs"] is not None, r


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pool", POOLS)
def test_closing_mid_turn_ends_the_agent_by_the_end_of_its_input(pool, mode, tmp_path):
    # SB-X-19: the daemon closes the agent's stdin at once, and the agent exits on it, as spawned
    # directly. With stop_grace_ms at 120 s nothing else can end it within the wait (SIGTERM
    # comes only then): an exit seen is the end of its input, at any pace (its time is
    # measure.py's, tests/interop/acp/README.md).
    exit_ms = close_mid_turn(mode, POOLS[pool](1, mode), tmp_path, wait_ms=60000,
                             limits={"stop_grace_ms": 120000})
    assert exit_ms is not None, "the agent outlived its editor by 60 s: its stdin was not closed"


@pytest.mark.parametrize("mode", ("unix", "tcp"))
def test_a_client_that_reconnects_at_once_is_served(mode, tmp_path):
    """One client, a complete session, then reconnect at once, ten times, on
    `instances: 1`: never refused."""
    with Bus(mode, {"spawn": "per_connection", "instances": 1}, tmp_path) as bus:
        r, = run_clients(bus.target(), "reconnect", 1, tmp_path / "bus", bus.stderr_file)
    assert r["refused"] == 0 and r["answered"] == r["rounds"], r


@pytest.mark.parametrize("mode", ("unix", "tcp"))
@pytest.mark.parametrize("pool", POOLS)
def test_four_clients_churning_get_every_prompt_answered(pool, mode, tmp_path):
    """Four clients connect, prompt, leave mid-turn (a permission request
    pending) and reconnect at once, for 10 s (ACP_CHURN_SECONDS=60 for the
    issue's minute): no refusal, no hold."""
    seconds = os.environ.get("ACP_CHURN_SECONDS", "10")
    with Bus(mode, {**POOLS[pool](4, mode), "instances": 4}, tmp_path) as bus:
        runs = run_clients(bus.target(), "churn", 4, tmp_path / "bus", bus.stderr_file, env={"ACP_SECONDS": seconds})
    total = {key: sum(r[key] for r in runs) for key in ("rounds", "answered", "refused", "held")}
    print(f"churn {pool} {mode} {seconds} s: {total}")  # shown by pytest -rP
    # a hold is mostly a second client bound to a busy worker, whose requests to its client are then discarded (SB-X-12)
    assert total["refused"] == 0 and total["held"] == 0 and total["answered"] == total["rounds"], \
        f"{total} {[r.get('heldAt') for r in runs]}\n{bus.stderr()[-4000:]}"


@pytest.mark.parametrize("mode", ("unix", "tcp"))
def test_affinity_binds_a_new_client_to_an_idle_worker(mode, tmp_path):
    """A on worker 0 (and still connected), B on worker 1, B leaves, C comes:
    C must get worker 1 (restarted fresh, SB-X-20), not share worker 0 with A
    (whose updates would then be dropped)."""
    with Bus(mode, {"affinity": "connection", "instances": 2}, tmp_path) as bus:
        # A: an ACP initialize, then it stays connected, reading nothing more
        family = socket.AF_UNIX if mode == "unix" else socket.AF_INET
        a = socket.socket(family, socket.SOCK_STREAM)
        host, _, port = bus.address.rpartition(":")
        a.connect(bus.address if mode == "unix" else (host, int(port)))
        try:
            a.sendall(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n')
            wait_until(lambda: len(bound(bus)) == 1, bus)
            run_clients(bus.target(), "hello", 1, tmp_path / "b", bus.stderr_file)  # B, gone after
            wait_until(lambda: len(bound(bus)) == 2, bus)
            c = subprocess.Popen([NODE, str(HERE / "client.mjs"), "hello", *bus.target()], cwd=HERE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_until(lambda: len(bound(bus)) == 3, bus)
            finally:
                c.kill()
                c.wait()
        finally:
            a.close()
        workers = bound(bus)
    assert workers[1] != workers[0] and workers[2] != workers[0], workers


def bound(bus):
    return [int(m) for m in re.findall(r"bound to worker (\d+)", bus.stderr())]


def wait_until(predicate, bus, timeout=10):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, bus.stderr()[-3000:]
        time.sleep(0.01)


# -- the spec's default pool: what breaks --------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_spec_default_drops_every_update_and_splits_the_session(mode, tmp_path):
    """instances 2, affinity off: initialize reaches one agent, session/new
    the other (the SDK refuses it there: not initialized); of the two
    prompts, one reaches the agent that never initialized, the other is
    answered, but its updates, which carry their sessionId inside params,
    are dropped as unroutable (6.3.3)."""
    with Bus(mode, {"instances": 2}, tmp_path) as bus:
        r, = run_clients(bus.target(), "specDefault", 1, tmp_path / "bus", bus.stderr_file)
        err = bus.stderr()
    assert r["init"]["protocolVersion"] == 1, r
    assert r["newSession"]["error"]["code"] == -32600 and "initialized" in r["newSession"]["error"]["message"], r
    assert r["newSessionAgain"] == "S1", r
    assert r["first"]["error"]["code"] == -32600 and "initialized" in r["first"]["error"]["message"], r
    assert r["second"] == {"stopReason": "end_turn", "count": 0, "updates": []}, r
    dropped = [l for l in complaints(err) if "discarding message" in l and "neither a response with an id nor a sessionId" in l]
    assert len(dropped) == 3, err[-3000:]


@pytest.mark.parametrize("mode", ("unix", "tcp"))
def test_spec_default_drops_the_permission_request_and_the_prompt_hangs(mode, tmp_path):
    """instances 1: the agent's session/request_permission is dropped, so the
    prompt that asked it is never answered (seen through the daemon's own
    warning, then the client is stopped)."""
    with Bus(mode, {"instances": 1}, tmp_path) as bus:
        p = subprocess.Popen([NODE, str(HERE / "client.mjs"), "turns", *bus.target()], cwd=HERE,
                             env={**os.environ, "ACP_WORKSPACE": str(tmp_path)}, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        try:
            # the agent's request (it has an id) is dropped: id=0, its first request
            request_dropped = re.compile(r"WARN .*discarding message: id=0: neither a response with an id nor a sessionId")
            wait_until(lambda: request_dropped.search(bus.stderr()) or p.poll() is not None, bus)
            assert p.poll() is None, "the prompt was answered"
        finally:
            p.kill()
            p.wait()


# -- whole files in one message meet the spec's 1 MiB line limit (issue 23 item 5) -------------------
SPEC_LIMIT = {"max_input_buffer": 1024 * 1024}  # the spec's default


def run_failing_client(target, scenario, workspace, env):
    """Runs one client that must fail; its stderr."""
    workspace.mkdir(exist_ok=True)
    p = subprocess.run([NODE, str(HERE / "client.mjs"), scenario, *target], cwd=HERE, capture_output=True, text=True,
                       env={**os.environ, "ACP_WORKSPACE": str(workspace), **env}, timeout=WAIT_S)
    assert p.returncode != 0, f"the client succeeded: {p.stdout[:500]}"
    return p.stderr


def test_with_the_default_limit_a_2_mib_read_answer_closes_the_editor(tmp_path):
    with Bus("unix", POOLS["per_connection"](1, "unix"), tmp_path, limits=SPEC_LIMIT) as bus:
        err = run_failing_client(bus.target(), "bigFiles", tmp_path / "bus", {"ACP_BIG": "read"})
        wait_until(lambda: "pending request(s) discarded" in bus.stderr(), bus)
        log = bus.stderr()
    assert "ECONNRESET" in err or "closed" in err, err[-2000:]
    assert re.search(r"ERROR \[client fd=\d+\] line longer than max_input_buffer \(1048576 bytes\): closing the client", log), log[-3000:]


def test_with_the_default_limit_a_2_mib_write_request_ends_the_agent(tmp_path):
    with Bus("unix", POOLS["per_connection"](1, "unix"), tmp_path, limits=SPEC_LIMIT) as bus:
        run_failing_client(bus.target(), "bigFiles", tmp_path / "bus", {"ACP_BIG": "write"})
        wait_until(lambda: "closing the connection" in bus.stderr(), bus)
        log = bus.stderr()
    assert re.search(r"ERROR \[worker 0 pool=acp pid=\d+\] line longer than max_input_buffer \(1048576 bytes\): terminating the worker", log), log[-3000:]
