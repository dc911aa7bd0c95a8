#!/usr/bin/env python3
"""Proves the bite map (conformance/bite_map.toml): for each recorded break,
applies it, runs only the tests the map names for it (run.py --only), and
checks that, for every clause the map records under that break, a test
judged on that clause fails (outcome `fail`, results.json `clause`). What
else fails among those tests is reported, never hidden.

    conformance/mutants/verify_bites.py [--fast] [--only KIND:NAME|NAME ...]
        [--build-dir build] [--out build/bite] [--parallel 2]
    conformance/mutants/verify_bites.py --discover [--only ...] [--write-map]

Kinds of break:
  mutant           a description of a change to src/ in this folder (NN-name.toml,
                   describe.py); built incrementally in one scratch tree (copied
                   once, the change written, rebuild, the original text put back)
  fbus             a defect switch of the foreign daemon (FOREIGN_BUS_DEFECT)
  fake-daemon      a --break of selftest/fake_daemon.py
  mock-worker      a misbehaving mode of mock_worker (worker_tests/run_catches.py)
  fake-mcp-worker  a --break of selftest/fake_mcp_worker.py (worker mode)
  acp-agent        a broken variant of the ACP interop agent (tests/interop/acp,
                   ACP_AGENT_BREAK; needs its node_modules: npm ci there)

Output: <out>/verify.json (read by `run.py --coverage --bite`; --fast writes
verify-fast.json unless --out-json says otherwise) and a table on the
console. Exit 0 when every break bit every clause recorded under it, 1 when
one did not, 2 when a break could not be applied (a mutant whose description
no longer matches src/ is an ERROR naming it, never a miss) or a run not judged.

--discover runs, for each break, the tests citing the clauses it claims to
break (a mutant's `breaks`, a fbus defect's clauses) or the tests the
self-tests name for it (fake daemon, fake MCP worker), or the whole worker
suite (mock_worker modes), and lists every MUST clause a failing test was
judged on; --write-map adds those not yet in the map (two tests per clause).
"""
import argparse
import ast
import concurrent.futures as cf
import datetime
import fnmatch
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONF = HERE.parent
ROOT = CONF.parent
SELFTEST = CONF / "selftest"
ACP = ROOT / "tests" / "interop" / "acp"
MAP = CONF / "bite_map.toml"
sys.path.insert(0, str(CONF))
sys.path.insert(0, str(CONF / "worker_tests"))
sys.path.insert(0, str(HERE))
import describe  # noqa: E402
from clauses_check import parse_spec  # noqa: E402
from stdio_bus_conformance.reports import bite  # noqa: E402

PY = sys.executable


# -- where the breaks come from -------------------------------------------------------------------
class _EmptySets(ast.NodeTransformer):
    """`set()` as the empty set literal it means (literal_eval takes no calls)."""

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id == "set" and not node.args and not node.keywords:
            return ast.Set(elts=[])
        return self.generic_visit(node)


def _literal(path: Path, name: str):
    """A module-level literal (dict, str) of a file, read without importing it."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(_EmptySets().visit(node.value))
    raise KeyError(f"{name} not in {path}")


def mutant_claims(name: str) -> list[str]:
    return describe.load(HERE / f"{name}.toml").breaks


def mock_modes() -> dict:
    import run_catches
    return {c[0]: c[1] for c in run_catches.CATCHES}


FBUS_CLAUSES = {  # foreign/README.md, Defect switches
    "crash-on-sigterm": ["SB-10.1-1", "SB-10.2-6"],
    "no-exit-on-eof-flood": ["SB-I-5"],
    "no-restart-after-exit0": ["SB-7.1.3-1", "SB-I-9"],
    "drops-slow-reader": ["SB-7.3.1-1"],
    "no-two-pool-routing": ["SB-6.1.1-1", "SB-6.1.3-1", "SB-I-11"],
    "dies-after-malformed": ["SB-4.3-1"],
}


def all_breaks() -> list[tuple[str, str]]:
    out = [("mutant", p.stem) for p in describe.mutant_paths()]
    out += [("fbus", n) for n in FBUS_CLAUSES]
    out += [("fake-daemon", n) for n in _literal(SELFTEST / "test_suite_catches_breaks.py", "BREAKS")]
    out += [("mock-worker", n) for n in mock_modes()]
    out += [("fake-mcp-worker", n) for n in _literal(SELFTEST / "test_worker_mode.py", "BREAKS")]
    out += [("acp-agent", n) for n in acp_breaks()]
    return out


def acp_breaks() -> dict:
    """ACP_AGENT_BREAK name -> the clauses it fails (test_acp_profile.py's BREAKS;
    a variant that only warns breaks no MUST clause)."""
    return {n: sorted(fails) for n, (fails, _) in _literal(ACP / "test_acp_profile.py", "BREAKS").items()
            if n and fails}


# -- running the suite against one break ----------------------------------------------------------
class Runner:
    def __init__(self, build: Path, scratch: Path):
        self.build, self.scratch = build, scratch
        self.mock = build / "mock_workers" / "mock_worker"

    def command(self, kind: str, name: str, binary: Path | None, rdir: Path,
                one_at_a_time: bool = True) -> tuple[list, dict]:
        # a break's tests one at a time (several breaks run at once); the
        # control run alone, at the suite's own parallelism
        base = [PY, str(CONF / "run.py"), "--report-dir", str(rdir), "-q", "--no-coverage-gate", "--seed", "28"]
        base += ["-j", "1"] if one_at_a_time else []
        env = dict(os.environ)
        env.pop("FOREIGN_BUS_DEFECT", None)
        if kind == "mutant":
            return base + ["--daemon", str(binary), "--profile", str(CONF / "profiles" / "stdio_bus.toml"),
                           "--mock-worker", str(self.mock)], env
        if kind == "fbus":
            env["FOREIGN_BUS_DEFECT"] = name
            return base + ["--daemon", str(SELFTEST / "foreign_daemon.py"),
                           "--profile", str(CONF / "profiles" / "foreign.toml"), "--mock-worker", str(self.mock)], env
        if kind == "fake-daemon":
            prof = rdir.parent / f"{rdir.name}.profile.toml"
            prof.write_text(f'name = "fake"\nextra_args = {json.dumps(["--break", name])}\n')
            return base + ["--daemon", str(SELFTEST / "fake_daemon.py"), "--mock-worker",
                           str(SELFTEST / "fake_worker.py"), "--profile", str(prof), "--wait-timeout", "1"], env
        if kind == "mock-worker":
            return base + ["--worker-description", str(CONF / "profiles" / "worker_mock.toml"),
                           "--worker", shlex.join([str(self.mock)] + mock_modes()[name])], env
        if kind == "fake-mcp-worker":
            desc = rdir.parent / f"{rdir.name}.worker.toml"
            desc.write_text(_literal(SELFTEST / "test_worker_mode.py", "DESCRIPTION")
                            .format(profiles='["plain", "jsonrpc", "mcp"]'))
            return base + ["--worker-description", str(desc), "--worker",
                           shlex.join([str(SELFTEST / "fake_mcp_worker.py"), "--break", name])], env
        if kind == "acp-agent":
            return base + ["--worker-description", str(ACP / "agent.toml"),
                           "--worker-env", f"ACP_AGENT_BREAK={name}"], env
        raise ValueError(kind)

    def run(self, kind, name, binary, selection: list, rdir: Path,
            one_at_a_time: bool = True) -> tuple[dict | None, str]:
        shutil.rmtree(rdir, ignore_errors=True)
        rdir.mkdir(parents=True)
        cmd, env = self.command(kind, name, binary, rdir, one_at_a_time)
        try:
            p = subprocess.run(cmd + selection, capture_output=True, text=True, env=env, timeout=900, cwd=rdir)
        except subprocess.TimeoutExpired:  # a row of its own, never the end of the whole verification
            return None, "the run did not end within 900 s"
        res = rdir / "results.json"
        data = json.loads(res.read_text()) if res.exists() else None
        return data, (p.stdout + p.stderr)[-2000:]


class MutantBuilder:
    """One scratch copy of the tree, configured once; each mutant's change is
    written, the daemon rebuilt (only what it touched recompiles), the binary
    copied out, and the files it changed given back their original text."""

    def __init__(self, scratch: Path):
        self.tree, self.bdir, self.bins = scratch / "tree", scratch / "build", scratch / "bin"
        self.lock = threading.Lock()
        self.ready = False

    def _setup(self):
        shutil.rmtree(self.tree, ignore_errors=True)
        self.tree.mkdir(parents=True)
        shutil.copytree(ROOT / "src", self.tree / "src")
        shutil.copytree(ROOT / "cmake", self.tree / "cmake")
        for f in ROOT.iterdir():
            if f.is_file():
                shutil.copy(f, self.tree)
        self.bins.mkdir(parents=True, exist_ok=True)
        self._sh(["cmake", "-S", str(self.tree), "-B", str(self.bdir), "-DSB_TESTS=OFF",
                  "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
        self._sh(["cmake", "--build", str(self.bdir), "--target", "stdio_bus", "-j2"])
        self.ready = True

    def _sh(self, cmd):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"{' '.join(cmd[:3])}: {(r.stdout + r.stderr)[-1500:]}")

    def build(self, name: str) -> Path:
        with self.lock:
            if not self.ready:
                self._setup()
            originals = describe.apply(describe.load(HERE / f"{name}.toml"), self.tree / "src")
            try:
                self._sh(["cmake", "--build", str(self.bdir), "--target", "stdio_bus", "-j2"])
                out = self.bins / name
                shutil.copy(self.bdir / "stdio_bus", out)
                return out
            finally:
                describe.restore(originals)


# -- judging ---------------------------------------------------------------------------------------
PREFLIGHT = "preflight::"


def judged_failures(data: dict) -> dict:
    """clause -> [nodeid] of the tests that failed judged on it, at its level:
    a SHOULD/MAY clause's test warns (issue 34); a preflight item found
    broken (a root cause, reported once on its own clause, which fails the
    run) counts as a test named preflight::<item>."""
    out: dict = {}
    for t in data.get("tests", []):
        at_its_level = t["outcome"] == "fail" or (
            t["outcome"] == "warn" and t.get("level") not in ("MUST", "MUST NOT"))
        if at_its_level and t.get("clause"):
            out.setdefault(t["clause"], []).append(t["nodeid"])
    for rc in data.get("root_causes") or []:
        if rc.get("level") in ("MUST", "MUST NOT") and rc.get("binding", True):
            out.setdefault(rc["clause"], []).append(PREFLIGHT + rc["item"])
    return out


def verify_one(runner, builder, key, entries, out_dir) -> dict:
    kind, name = key.split(":", 1)
    t0 = time.monotonic()
    row = {"kind": kind, "name": name, "clauses": sorted({e.clause for e in entries}), "bit": [], "missed": [],
           "also_failed": {}, "harness": "", "seconds": 0.0}
    try:
        binary = builder.build(name) if kind == "mutant" else None
    except describe.MutantError as exc:  # its description no longer matches src/: an error, not a miss
        row["harness"] = f"does not apply: {exc}"
        return row
    except (RuntimeError, OSError) as exc:
        row["harness"] = f"cannot build: {exc}"
        return row
    tests = list(dict.fromkeys(t for e in entries for t in e.tests if not t.startswith(PREFLIGHT)))
    sel = [a for t in tests for a in ("--only", t)]
    data, tail = runner.run(kind, name, binary, sel, out_dir / f"{kind}-{name}")
    row["seconds"] = round(time.monotonic() - t0, 1)
    if data is None:
        row.update(harness=f"no results: {tail}", missed=row["clauses"])
        return row
    if data["summary"].get("harness-error") or data.get("collection_errors") or data.get("fatal_errors"):
        row["harness"] = "harness error or collection error in the run"
    if data["summary"].get("total", 0) < len(tests):
        row["harness"] = (row["harness"] + "; " if row["harness"] else "") + \
            f"{data['summary'].get('total', 0)} of {len(tests)} tests ran (renamed?)"
    fails = judged_failures(data)
    for e in entries:
        ok = any(n in e.tests for n in fails.get(e.clause, []))
        (row["bit"] if ok else row["missed"]).append(e.clause)
    row["bit"], row["missed"] = sorted(set(row["bit"])), sorted(set(row["missed"]) - set(row["bit"]))
    row["also_failed"] = {c: n for c, n in fails.items() if c not in row["clauses"]}
    return row


def discover_one(runner, builder, kind, name, out_dir, mandatory) -> dict:
    t0 = time.monotonic()
    row = {"kind": kind, "name": name, "failed": {}, "harness": "", "seconds": 0.0}
    if kind == "mutant":
        try:
            claims = mutant_claims(name)
        except describe.MutantError as exc:
            row["harness"] = f"does not apply: {exc}"
            return row
        sel = [a for c in claims for a in ("--clause", c)]
    elif kind == "fbus":
        sel = [a for c in FBUS_CLAUSES[name] for a in ("--clause", c)]
    elif kind == "fake-daemon":
        tests = _literal(SELFTEST / "test_suite_catches_breaks.py", "BREAKS")[name]
        sel = ["tests/test_framing.py", "tests/test_routing.py", "-k", " or ".join(tests)]
    elif kind == "fake-mcp-worker":
        sel = ["-k", " or ".join(_literal(SELFTEST / "test_worker_mode.py", "BREAKS")[name])]
    elif kind == "acp-agent":
        sel = [a for c in acp_breaks()[name] for a in ("--clause", c)]
    else:
        sel = []
    try:
        binary = builder.build(name) if kind == "mutant" else None
    except describe.MutantError as exc:
        row["harness"] = f"does not apply: {exc}"
        return row
    except (RuntimeError, OSError) as exc:
        row["harness"] = f"cannot build: {exc}"
        return row
    if kind == "fake-daemon":  # its files are positional: resolve them from the suite
        sel = [str(CONF / s) if s.endswith(".py") else s for s in sel]
    data, tail = runner.run(kind, name, binary, sel, out_dir / f"discover-{kind}-{name}")
    row["seconds"] = round(time.monotonic() - t0, 1)
    if data is None:
        row["harness"] = f"no results: {tail}"
        return row
    ran = [t["nodeid"] for t in data.get("tests", [])]
    row["failed"] = {c: sorted(n) + ([ran[0]] if ran and all(x.startswith(PREFLIGHT) for x in n) else [])
                     for c, n in judged_failures(data).items()}
    row["must"] = sorted(c for c in row["failed"] if c in mandatory)
    return row


# -- the map as text --------------------------------------------------------------------------------
HEADER = """\
# The bite map (issue 28): for each MUST / MUST NOT black-box clause of SPEC.md
# and WORKER_SPEC.md, the breaks under which a test judged on that clause fails.
# Format and statuses: stdio_bus_conformance/reports/bite.py; verified by
# conformance/mutants/verify_bites.py; read by `run.py --coverage --bite`.
# Regenerate entries with `verify_bites.py --discover --write-map` (existing
# entries, notes and no-bite reasons are kept); order: the spec's.
"""


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def dump(bmap: bite.BiteMap, order: dict) -> str:
    key = lambda c: order.get(c, 10 ** 6)  # noqa: E731
    out = [HEADER]
    for b in sorted(bmap.breaks, key=lambda b: (key(b.clause), b.kind != "mutant", b.kind, b.name)):
        out += ["[[bite]]", f"clause = {_q(b.clause)}", f"kind = {_q(b.kind)}", f"name = {_q(b.name)}"]
        out.append("tests = [" + ", ".join(_q(t) for t in b.tests) + "]")
        if b.fast:
            out.append("fast = true")
        if b.half:
            out.append(f"half = {_q(b.half)}")
        if b.note:
            out.append(f"note = {_q(b.note)}")
        out.append("")
    for n in sorted(bmap.no_bite, key=lambda n: key(n.clause)):
        out += ["[[no-bite]]", f"clause = {_q(n.clause)}"]
        if n.half:
            out.append(f"half = {_q(n.half)}")
        out += [f"reason = {_q(n.reason)}", ""]
    for v in sorted(bmap.via, key=lambda v: key(v.clause)):
        out += ["[[via]]", f"clause = {_q(v.clause)}", "via = [" + ", ".join(_q(c) for c in v.via) + "]",
                f"reason = {_q(v.reason)}", ""]
    return "\n".join(out)


def mandatory_clauses() -> dict:
    """id -> position, for every MUST/MUST NOT black-box clause of both specs."""
    out = {}
    for spec in ("SPEC.md", "WORKER_SPEC.md"):
        for c in parse_spec(str(ROOT / spec)):
            if c["level"] in ("MUST", "MUST NOT") and c["check"] == "black-box":
                out[c["id"]] = len(out)
    return out


def inventory() -> dict:
    """nodeid -> cited clauses, in order, of the daemon and the worker suites."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="sb-inventory-") as tmp:
        for what, extra in (("tests", []), ("worker_tests", ["--worker-description",
                                                             str(CONF / "profiles" / "worker_mock.toml"),
                                                             "--worker", "/bin/cat"])):
            dest = Path(tmp) / f"{what}.json"
            env = dict(os.environ, SB_INVENTORY_OUT=str(dest),
                       PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
            subprocess.run([PY, "-m", "pytest", "-p", "sb_inventory", "--collect-only", "-q", "-p",
                            "no:cacheprovider", *extra, what], cwd=CONF, env=env, capture_output=True)
            out.update(json.loads(dest.read_text()))
    return out


def why_unproven(cid: str, inv: dict) -> str:
    citing = [n for n, ids in inv.items() if cid in ids]
    first = [n for n in citing if n and inv[n][0] == cid]
    fns = sorted({n.split("[")[0] for n in citing})
    if not citing:
        return "no test cites it"
    named = [f for f in sorted({n.split("::")[0] for n in citing})
             if any(f'{w}("{cid}"' in (CONF / f).read_text() for w in ("check", "checking"))]
    if not first and named:
        return (f"cited by {len(citing)} test(s), first in none; check()/checking() name it in "
                f"{', '.join(named)}, but no recorded break fails those checks yet")
    if not first:
        return (f"cited by {len(citing)} test(s) ({', '.join(f.split('::')[-1] for f in fns[:3])}"
                f"{', ...' if len(fns) > 3 else ''}) but first in none: their plain asserts are judged on "
                "another clause and no check() names it, so no break can fail a test judged on it")
    return (f"first clause of {len(first)} test(s) ({', '.join(sorted({f.split('[')[0].split('::')[-1] for f in first})[:3])}); "
            "no recorded break fails them yet")


def status(args) -> int:
    """Every MUST black-box clause of both specs: its bite status, and why
    each unproven one is."""
    mandatory = mandatory_clauses()
    bmap = bite.load(args.map)
    vpath = Path(args.out_json) if args.out_json else Path(args.out) / "verify.json"
    bites = bite.compute(list(mandatory), bmap, bite.load_verification(vpath))
    inv = inventory()
    print("\n".join(bite.lines(bites, gate=True)))
    missing = [c for c, b in bites.items() if b.status in ("missing", "unverified")]
    for c in missing:
        print(f"  {c}: {why_unproven(c, inv)}")
    if args.fill_no_bite:
        have = bmap.clauses()
        added = [bite.NoBite(c, why_unproven(c, inv)) for c, b in bites.items() if c not in have]
        bmap.no_bite += added
        Path(args.map).write_text(dump(bmap, mandatory))
        print(f"{len(added)} no-bite entries added to {args.map}")
    return 1 if any(b.status == "missing" for b in bites.values()) else 0


def select(breaks, only):
    if not only:
        return breaks
    return [b for b in breaks if any(fnmatch.fnmatchcase(f"{b[0]}:{b[1]}", o) or fnmatch.fnmatchcase(b[1], o)
                                     for o in only)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=str(ROOT / "build"))
    ap.add_argument("--out", default=None, help="report folder (default <build-dir>/bite)")
    ap.add_argument("--out-json", default=None, help="the verification results (default <out>/verify.json)")
    ap.add_argument("--map", default=str(MAP))
    ap.add_argument("--only", nargs="*", default=[], help="KIND:NAME or NAME globs")
    ap.add_argument("--fast", action="store_true", help="only the entries marked fast = true")
    ap.add_argument("--parallel", type=int, default=2, help="suite runs at once (default 2)")
    ap.add_argument("--control", action="store_true",
                    help="also run the mutant entries' tests against the unmodified daemon: they must pass")
    ap.add_argument("--discover", action="store_true")
    ap.add_argument("--write-map", action="store_true", help="with --discover: add what was found to the map")
    ap.add_argument("--status", action="store_true",
                    help="print every MUST clause's bite status (both specs), and why each unproven one is")
    ap.add_argument("--fill-no-bite", action="store_true",
                    help="with --status: list each clause missing from the map as no-bite, with that reason")
    args = ap.parse_args()
    build = Path(args.build_dir).resolve()
    out = Path(args.out or build / "bite").resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.status:
        args.out = str(out)
        return status(args)
    if not (build / "mock_workers" / "mock_worker").exists():
        print(f"no mock_worker in {build}: build first")
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="sb-bite-"))
    runner, builder = Runner(build, scratch), MutantBuilder(scratch)
    t0 = time.monotonic()
    try:
        if args.discover:
            return discover(args, runner, builder, out)
        return verify(args, runner, builder, out, t0)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_all(jobs, fn, parallel):
    """Mutants first, in order (their builds are serial), the others beside them."""
    rows = []
    with cf.ThreadPoolExecutor(max_workers=max(1, parallel)) as ex:
        futs = [ex.submit(fn, *j) for j in jobs]
        for f in cf.as_completed(futs):
            rows.append(f.result())
            yield rows[-1]


# a harness verdict that a second run cannot change
DETERMINISTIC = ("does not apply", "cannot build")


def row_verdict(row: dict) -> str:
    return "ok" if not row["missed"] and not row["harness"] else "MISSED" if not row["harness"] else "ERROR"


def row_line(row: dict) -> str:
    also = f"; also failed: {' '.join(sorted(row['also_failed']))}" if row["also_failed"] else ""
    return (f"{row_verdict(row):6} {row['kind']}:{row['name']} bit {' '.join(row['bit']) or '-'}"
            f"{'; missed ' + ' '.join(row['missed']) if row['missed'] else ''}{also}"
            f"{'; ' + row['harness'] if row['harness'] else ''} ({row['seconds']} s)")


def verify(args, runner, builder, out, t0) -> int:
    bmap = bite.load(args.map)
    groups = bmap.by_break()
    if args.fast:
        groups = {k: [e for e in v if e.fast] for k, v in groups.items()}
        groups = {k: v for k, v in groups.items() if v}
    keys = [k for k in groups if select([tuple(k.split(":", 1))], args.only)]
    keys.sort(key=lambda k: (not k.startswith("mutant:"), k))
    if not keys:
        print("no break selected")
        return 2
    jobs = [(runner, builder, k, groups[k], out) for k in keys]
    rows, worst = [], 0
    for row in run_all(jobs, verify_one, args.parallel):
        rows.append(row)
        print(row_line(row), flush=True)
    # A break that missed while others ran beside it is run again alone: if it
    # bites then, the suite does bite it, and the first run is kept in the row
    # and in the recap below (a test whose bite depends on the machine's load).
    again = [r for r in rows if row_verdict(r) != "ok" and not r["harness"].startswith(DETERMINISTIC)]
    if again:
        print(f"{len(again)} break(s) not bitten beside others: each run again, alone", flush=True)
        retry = {f"{r['kind']}:{r['name']}": r for r in again}
        for row in run_all([(runner, builder, k, groups[k], out) for k in retry], verify_one, 1):
            first = retry[f"{row['kind']}:{row['name']}"]
            row["first_run"] = {k: first[k] for k in ("bit", "missed", "harness", "seconds")}
            rows[rows.index(first)] = row
            print("again: " + row_line(row), flush=True)
    worst = max([{"ok": 0, "MISSED": 1, "ERROR": 2}[row_verdict(r)] for r in rows] + [0])
    rows.sort(key=lambda r: (r["kind"] != "mutant", r["kind"], r["name"]))
    control = None
    if args.control:  # the unmodified daemon passes every test the mutants' entries name
        tests = sorted({t for k in keys if k.startswith("mutant:") for e in groups[k] for t in e.tests
                        if not t.startswith(PREFLIGHT)})
        data, tail = runner.run("mutant", "control", runner.build / "stdio_bus",
                                [a for t in tests for a in ("--only", t)], out / "control", one_at_a_time=False)
        bad = [t["nodeid"] for t in (data or {}).get("tests", []) if t["outcome"] != "pass"]
        control = {"ran": len((data or {}).get("tests", [])), "not_passed": bad}
        print(f"control: our daemon, {control['ran']} tests of the mutant entries: "
              f"{'all pass' if data and not bad else 'NOT PASSED: ' + ' '.join(bad[:5]) + tail[-300:]}")
        if data and bad:  # the suite's parallelism loads the machine: those again, one at a time
            data2, tail = runner.run("mutant", "control", runner.build / "stdio_bus",
                                     [a for t in bad for a in ("--only", t)], out / "control-again")
            control.update(first_run_not_passed=bad,
                           not_passed=[t["nodeid"] for t in (data2 or {}).get("tests", []) if t["outcome"] != "pass"]
                           if data2 else bad)
            bad = control["not_passed"]
            print(f"control again, one at a time: {'all pass' if data2 and not bad else 'NOT PASSED: ' + ' '.join(bad[:5])}")
        worst = max(worst, 0 if data and not bad else 1)
    wall = round(time.monotonic() - t0, 1)
    target = Path(args.out_json) if args.out_json else out / ("verify-fast.json" if args.fast else "verify.json")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    target.write_text(json.dumps({
        "when": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "commit": commit,
        "map": str(Path(args.map).resolve()), "subset": "fast" if args.fast else ("only" if args.only else "all"),
        "seconds": wall, "control": control, "breaks": rows}, indent=2) + "\n")
    bit = {c for r in rows for c in r["bit"]}
    wanted = {e.clause for k in keys for e in groups[k]}
    # the recap last, where a CI log's tail shows it
    for r in rows:
        if r.get("first_run") or row_verdict(r) != "ok":
            first = r.get("first_run")
            print("recap: " + row_line(r) + (f" [first run, beside others: missed {' '.join(first['missed']) or '-'}"
                                             f"{'; ' + first['harness'] if first['harness'] else ''}]" if first else ""))
    if control and control.get("first_run_not_passed"):
        print(f"recap: control not passed beside others: {' '.join(control['first_run_not_passed'])}; "
              f"alone: {' '.join(control['not_passed']) or 'all pass'}")
    print(f"{len(bit)} of {len(wanted)} clauses bitten by their recorded breaks; {len(rows)} breaks "
          f"in {wall} s; results in {target}")
    return worst


def discover(args, runner, builder, out) -> int:
    mandatory = mandatory_clauses()
    breaks = select(all_breaks(), args.only)
    breaks.sort(key=lambda b: (b[0] != "mutant", b))
    jobs = [(runner, builder, k, n, out, mandatory) for k, n in breaks]
    rows = []
    for row in run_all(jobs, discover_one, args.parallel):
        rows.append(row)
        print(f"{row['kind']}:{row['name']}: MUST {' '.join(row.get('must', [])) or '-'}"
              f"{'; ' + row['harness'] if row['harness'] else ''} ({row['seconds']} s)", flush=True)
    (out / "discover.json").write_text(json.dumps(rows, indent=2) + "\n")
    if not args.write_map:
        return 0
    bmap = bite.load(args.map) if Path(args.map).exists() else bite.BiteMap()
    have = {(b.clause, b.key) for b in bmap.breaks}
    added = 0
    for row in sorted(rows, key=lambda r: (r["kind"] != "mutant", r["kind"], r["name"])):
        for c in row.get("must", []):
            if (c, f"{row['kind']}:{row['name']}") in have:
                continue
            bmap.breaks.append(bite.Break(c, row["kind"], row["name"], _pick(row["failed"][c])))
            added += 1
    Path(args.map).write_text(dump(bmap, mandatory))
    print(f"{added} entries added to {args.map}")
    return 0


def _pick(nodeids: list) -> list:
    """Two tests, of different functions or modes where there are; a
    preflight item with the test that makes the run."""
    if any(n.startswith(PREFLIGHT) for n in nodeids):
        return [n for n in nodeids if n.startswith(PREFLIGHT)][:1] + \
            [n for n in nodeids if not n.startswith(PREFLIGHT)][:1]
    seen, out = set(), []
    for n in nodeids:
        fn = n.split("[")[0]
        if fn not in seen:
            seen.add(fn)
            out.append(n)
    return (out + [n for n in nodeids if n not in out])[:2]


if __name__ == "__main__":
    sys.exit(main())
