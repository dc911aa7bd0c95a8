"""An ACP agent on its stdio transport (WORKER_SPEC.md, Appendix G): the
suite plays the editor. It initializes with the fs client capabilities,
opens sessions and sends the prompts of the worker description's [acp]
(prompt: a turn that ends by itself; permission_prompt: a turn that asks
session/request_permission), answering the agent's requests as an editor
would: permission granted (or held, then `cancelled`), fs reads an empty
file, fs writes succeed."""

import os

import pytest

from stdio_bus_conformance import check
from stdio_bus_conformance.worker import rawjson as wj
from stdio_bus_conformance.worker.checks import show
from stdio_bus_conformance.worker.preflight import satisfiable
from stdio_bus_conformance.worker.process import WorkerError, WorkerTimeout
from stdio_bus_conformance.worker.run import envelope

pytestmark = pytest.mark.worker_profile("acp")

PROTOCOL_VERSION = 1  # ACP v1, the version the suite speaks
STOP_REASONS = ("end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled")
CLIENT_INFO = {"name": "stdio-bus-conformance", "version": "1"}
CLIENT_CAPABILITIES = {"fs": {"readTextFile": True, "writeTextFile": True}}


def editor_answer(req: dict) -> dict:
    """What the suite, as the agent's editor, answers to its requests."""
    method = req.get("method")
    if method == "session/request_permission":
        options = (req.get("params") or {}).get("options") or []
        allow = next((o for o in options if str(o.get("kind", "")).startswith("allow")), options[0] if options else {})
        return {"result": {"outcome": {"outcome": "selected", "optionId": allow.get("optionId")}}}
    if method == "fs/read_text_file":
        return {"result": {"content": ""}}
    if method == "fs/write_text_file":
        return {"result": {}}
    return {"error": {"code": -32601, "message": "Method not found"}}


class Editor:
    """One agent process and the suite's editor end of it."""

    def __init__(self, worker, *, hold_permission=False):
        self.worker = worker
        self.hold_permission = hold_permission
        self.held = []  # permission requests not answered yet (hold_permission)
        self.auth_methods = []  # what initialize offered (ACP Initialization: authMethods)
        self.logged_in = False
        self.proc = worker.spawn(handshake=False, auto_reply=False)
        self.proc.auto_reply = self._reply

    def _reply(self, proc, line):
        obj = line.obj
        if self.hold_permission and obj.get("method") == "session/request_permission":
            self.held.append(line)
            return
        self.worker.reply_to(proc, line, editor_answer(obj))

    def request(self, method, params, *, rid=None) -> tuple[bytes, object]:
        rid = wj.token(rid or f"sb-acp-{self.worker.next_id()}")
        self.proc.send(envelope(id=rid, method=method, params=params))
        return rid, wj.id_key(rid)

    def notify(self, method, params) -> None:
        self.proc.send(envelope(method=method, params=params))

    def call(self, method, params) -> dict:
        """A request's response object (result or error)."""
        _, key = self.request(method, params)
        return self.proc.answer(key)

    def result(self, method, params) -> dict:
        obj = self.call(method, params)
        assert isinstance(obj.get("result"), dict), f"{method}: expected a result object, got {str(obj)[:300]}"
        return obj["result"]

    def initialize(self, version=PROTOCOL_VERSION) -> dict:
        res = self.result("initialize", {"protocolVersion": version, "clientCapabilities": CLIENT_CAPABILITIES,
                                         "clientInfo": CLIENT_INFO})
        self.auth_methods = res.get("authMethods") or []
        return res

    def log_in(self) -> None:
        """As the preflight's default flow (WORKER_SPEC.md, Appendix G): an
        agent that offers an authentication method this environment can
        satisfy is authenticated before its first session."""
        if self.logged_in:
            return
        self.logged_in = True
        method = satisfiable(self.auth_methods, {**os.environ, **self.worker.desc.env})
        if method is not None:
            self.call("authenticate", {"methodId": method.get("id")})

    def new_session(self) -> str:
        self.worker.blocked_by("acp-session")  # the preflight's default flow found no session here
        self.log_in()
        res = self.result("session/new", {"cwd": str(self.worker.workdir), "mcpServers": []})
        sid = res.get("sessionId")
        assert isinstance(sid, str), f"session/new: sessionId must be a string, got {res}"
        return sid

    def prompt(self, sid, text) -> tuple[bytes, object]:
        self.worker.blocked_by("acp-turn")  # the preflight's default flow saw no turn end here
        return self.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})


def ready(worker, **kw) -> Editor:
    ed = Editor(worker, **kw)
    ed.initialize()
    return ed


def updates(lines, sid=None):
    return [line for line in lines if line.kind == "notification" and line.obj.get("method") == "session/update"
            and (sid is None or (line.obj.get("params") or {}).get("sessionId") == sid)]


def framing_problem(line) -> str | None:
    """Why a stdout line that holds JSON breaks SB-G-1, or None."""
    if not line.complete:
        return "the last line has no newline"
    try:
        line.data.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8"
    obj = line.obj
    if not isinstance(obj, dict):
        return "not a JSON object"
    if obj.get("jsonrpc") != "2.0":
        return "no \"jsonrpc\": \"2.0\""
    if wj.kind(obj) not in ("request", "notification", "response"):
        return "neither a request, a notification nor a response"
    return None


def full_session(worker) -> Editor:
    """An agent taken as far as an editor can take it here: both prompts, when
    the preflight's default flow got a session and a turn (else what came
    before is all there is), then an unknown method, then ended. SB-G-1 and
    SB-G-2 bind every line the agent writes, so those lines are judged even
    when a login stops the flow."""
    ed = Editor(worker)
    ed.initialize()
    if "acp-session" not in worker.findings:
        sid = ed.new_session()
        for text in (worker.desc.prompt(), worker.desc.acp_permission_prompt):
            if text is None or "acp-turn" in worker.findings:  # no permission prompt without a description
                continue
            _, key = ed.prompt(sid, text)
            ed.proc.answer(key, worker.timeout * 4)
    ed.call("no/such_method", {})
    ed.proc.finish(worker.timeout, worker.drain_timeout)
    return ed


# -- framing and stdout ------------------------------------------------------------------------
@pytest.mark.clause("SB-G-1")
@pytest.mark.requires("acp_prompt")
def test_acp_every_message_is_one_json_rpc_line(worker):
    ed = full_session(worker)
    bad = [(line, why) for line in ed.proc.lines if line.obj is not None and (why := framing_problem(line))]
    assert not bad, f"{len(bad)} line(s) are not JSON-RPC messages: " + "; ".join(
        f"{why}: {line.data[:200]!r}" for line, why in bad[:5])


@pytest.mark.clause("SB-G-2")
@pytest.mark.requires("acp_prompt")
def test_acp_nothing_but_messages_on_stdout(worker):
    ed = Editor(worker)
    try:
        ed.proc.expect_silence(0.5)
    except WorkerError as exc:
        raise AssertionError(f"before any input: {exc}") from None
    ed.proc.finish(worker.timeout, worker.drain_timeout)
    ed = full_session(worker)
    bad = [line for line in ed.proc.lines if line.obj is None]
    assert not bad, f"{len(bad)} stdout line(s) are not JSON: {show(bad)}"


# -- initialization --------------------------------------------------------------------------
@pytest.mark.clause("SB-G-3")
def test_acp_initialize_answers_the_version_and_capabilities(worker):
    res = Editor(worker).initialize()
    assert isinstance(res.get("protocolVersion"), int) and not isinstance(res.get("protocolVersion"), bool), \
        f"protocolVersion must be an integer: {res}"
    if "agentCapabilities" in res:
        assert isinstance(res["agentCapabilities"], dict), f"agentCapabilities is not an object: {res}"
    if "authMethods" in res:
        assert isinstance(res["authMethods"], list), f"authMethods is not an array: {res}"


@pytest.mark.clause("SB-G-4")
def test_acp_initialize_negotiates_the_protocol_version(worker):
    offered = Editor(worker).initialize(1000).get("protocolVersion")
    assert isinstance(offered, int) and offered != 1000, f"asked for version 1000, the agent offered {offered!r}"
    got = Editor(worker).initialize(offered).get("protocolVersion")  # a connection is initialized once
    assert got == offered, f"asked for version {offered}, which it offered, and got {got!r}"


@pytest.mark.clause("SB-G-11")
def test_acp_meta_is_taken_whatever_it_holds(worker):
    """ACP Extensibility: every type has a `_meta` of any members, whose
    values implementations make no assumptions about. The same initialize
    with and without them (the request and its clientCapabilities) must get
    the same protocol version."""
    plain = Editor(worker).initialize().get("protocolVersion")
    meta = {"traceparent": "00-80e1afed08e019fc1110464cfa66635c-7a085853722dc6d2-01",
            "example.org/anything": [1, {"nested": None}, "x"], "example.org/flag": True}
    obj = Editor(worker).call("initialize", {
        "protocolVersion": PROTOCOL_VERSION, "clientInfo": CLIENT_INFO, "_meta": meta,
        "clientCapabilities": {**CLIENT_CAPABILITIES, "_meta": {"example.org/caps": {"depth": [None]}}}})
    assert isinstance(obj.get("result"), dict), f"initialize with _meta members got {str(obj)[:300]}"
    got = obj["result"].get("protocolVersion")
    assert got == plain, f"initialize got protocolVersion {plain!r} without _meta members and {got!r} with them"


# -- sessions and turns ----------------------------------------------------------------------
@pytest.mark.clause("SB-G-10")
def test_acp_has_the_baseline_session_methods(worker):
    """No login makes a method appear, so an agent that needs one still has
    session/new and session/prompt: whatever it answers them (a session, a
    refusal, "Authentication required", an unknown session), it is not
    -32601. session/prompt names a session the agent never made, so no turn
    runs; session/new is asked as the preflight's default flow asks it."""
    ed = ready(worker)
    asks = (("session/prompt", {"sessionId": "sb-no-such-session", "prompt": [{"type": "text", "text": "hi"}]}),
            ("session/new", {"cwd": str(worker.workdir), "mcpServers": []}))
    for method, params in asks:
        if method == "session/new":
            ed.log_in()
        _, key = ed.request(method, params)
        try:
            obj = ed.proc.answer(key, worker.timeout * 4)
        except WorkerTimeout:  # a back end that does not start here; an unanswered request is SB-J-16's
            continue
        assert wj.error_code(obj) != -32601, f"{method}: {str(obj)[:300]}"


@pytest.mark.clause("SB-G-5")
def test_acp_each_session_gets_its_own_id(worker):
    ed = ready(worker)
    a, b = ed.new_session(), ed.new_session()
    assert a != b, f"two session/new on one connection got the same sessionId {a!r}"


@pytest.mark.clause("SB-G-6")
@pytest.mark.requires("acp_prompt")
def test_acp_a_turn_streams_its_updates_then_answers_a_stop_reason(worker):
    ed = ready(worker)
    a, b = ed.new_session(), ed.new_session()
    _, ka = ed.prompt(a, worker.desc.prompt())
    _, kb = ed.prompt(b, worker.desc.prompt())  # two turns in flight at once
    answered = {}
    for sid, key in ((a, ka), (b, kb)):
        answer = ed.proc.recv_response(key, worker.timeout * 4)
        stop = (answer.obj.get("result") or {}).get("stopReason")
        assert stop in STOP_REASONS, f"session/prompt of {sid}: stopReason {stop!r} is not one of " \
                                     f"{STOP_REASONS}: {answer.data[:300]!r}"
        answered[sid] = answer.seq
    ed.new_session()  # a round trip: what the turns sent after their answers has arrived
    for line in updates(ed.proc.lines):
        sid = (line.obj.get("params") or {}).get("sessionId")
        assert sid in answered, f"a session/update names no session of this connection: {line.data[:300]!r}"
        assert line.seq < answered[sid], f"a session/update of {sid} after the turn's answer: {line.data[:300]!r}"


@pytest.mark.clause("SB-G-7")
@pytest.mark.requires("acp_permission_prompt")
def test_acp_a_cancelled_turn_waiting_for_permission_ends_cancelled(worker):
    ed = ready(worker, hold_permission=True)
    sid = ed.new_session()
    _, key = ed.prompt(sid, worker.desc.acp_permission_prompt)
    asked = ed.proc.take(lambda line: line.kind == "request" and line.obj.get("method") ==
                                  "session/request_permission", worker.timeout * 4, "session/request_permission")
    ed.notify("session/cancel", {"sessionId": sid})
    # ACP prompt turn, Cancellation: the client answers pending permission requests `cancelled`
    worker.reply_to(ed.proc, asked, {"result": {"outcome": {"outcome": "cancelled"}}})
    answer = ed.proc.recv_response(key, worker.timeout * 4)
    stop = (answer.obj.get("result") or {}).get("stopReason")
    assert stop == "cancelled", f"after session/cancel the turn ended with {answer.data[:300]!r}"
    ed.new_session()  # a round trip: what the turn sent after its answer has arrived
    late = [line for line in updates(ed.proc.lines, sid) if line.seq > answer.seq]
    assert not late, f"session/update of the cancelled turn after its answer: {show(late)}"


@pytest.mark.clause("SB-G-7", "SB-G-6")
def test_acp_a_turn_cancelled_at_once_sends_nothing_after_its_answer(worker):
    """The default flow's session/cancel: sent right after the prompt. The
    turn may have ended before the cancel reached the agent, so its stop
    reason is only held to the defined set; what every reading shares is that
    it is answered and that no update of it comes after that answer."""
    ed = ready(worker)
    sid = ed.new_session()
    _, key = ed.prompt(sid, worker.desc.prompt())
    ed.notify("session/cancel", {"sessionId": sid})
    answer = ed.proc.recv_response(key, worker.timeout * 4)
    stop = (answer.obj.get("result") or {}).get("stopReason")
    # a stop reason outside the set is SB-G-6's defect, whether the turn ended before the cancel
    # arrived or after: judged there, so the verdict does not depend on which came first
    check("SB-G-6", stop in STOP_REASONS, lambda: f"a cancelled turn ended with {answer.data[:300]!r}")
    ed.call("initialize", {"protocolVersion": PROTOCOL_VERSION, "clientCapabilities": CLIENT_CAPABILITIES})
    late = [line for line in updates(ed.proc.lines, sid) if line.seq > answer.seq]
    assert not late, f"session/update of the cancelled turn after its answer: {show(late)}"


# -- JSON-RPC ----------------------------------------------------------------------------------
@pytest.mark.clause("SB-G-8")
def test_acp_an_unknown_method_gets_32601_and_a_notification_nothing(worker):
    ed = ready(worker)
    obj = ed.call("no/such_method", {})
    assert wj.error_code(obj) == -32601, f"no/such_method: expected error -32601, got {str(obj)[:300]}"
    worker.blocked_by("notification-answered")  # SB-J-10's test names that root cause once
    ed.notify("no/such_notification", {})
    _, key = ed.request("initialize", {"protocolVersion": PROTOCOL_VERSION, "clientCapabilities": CLIENT_CAPABILITIES,
                                       "clientInfo": CLIENT_INFO})  # a request every agent answers, no session
    before, _ = ed.proc.until(key)
    replies = [line for line in before if line.kind == "response"]
    assert not replies, f"a notification was answered: {show(replies)}"


@pytest.mark.clause("SB-J-8")
def test_acp_initialize_with_a_version_that_is_no_integer_is_invalid_params(worker):
    """JSON-RPC 2.0 section 5.1 through ACP: only the code of an error that
    comes is judged (as for MCP, the MUST on the version binds the client,
    and an agent may accept what it gets)."""
    for version in ("one", {"major": 1}):
        obj = Editor(worker).call("initialize", {"protocolVersion": version, "clientCapabilities": CLIENT_CAPABILITIES})
        if "error" not in obj:
            continue
        assert wj.error_code(obj) == -32602, \
            f"initialize with protocolVersion {version!r}: expected error -32602, got {str(obj)[:300]}"
        return
    pytest.skip("the agent accepted both versions (a result each): no error code to judge")


# -- the end -----------------------------------------------------------------------------------
@pytest.mark.clause("SB-G-9")
def test_acp_end_of_input_ends_an_idle_agent(worker):
    ed = ready(worker)
    ed.proc.close_stdin()
    rc = ed.proc.wait_exit(worker.timeout, "after end of input, idle")
    assert rc == 0, f"the agent exited with status {rc} at end of input"


@pytest.mark.clause("SB-G-9")
@pytest.mark.requires("acp_permission_prompt")
def test_acp_end_of_input_ends_an_agent_waiting_for_permission(worker):
    ed = ready(worker, hold_permission=True)
    sid = ed.new_session()
    ed.prompt(sid, worker.desc.acp_permission_prompt)
    ed.proc.take(lambda line: line.kind == "request" and line.obj.get("method") == "session/request_permission",
                 worker.timeout * 4, "session/request_permission")
    ed.proc.close_stdin()
    try:
        ed.proc.wait_exit(worker.timeout, "after end of input, a permission request pending")
    except WorkerError as exc:
        raise AssertionError(f"the editor closed the agent's stdin mid-turn and the agent went on: {exc}") from None
