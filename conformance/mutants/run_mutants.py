#!/usr/bin/env python3
"""Proof that the suite bites: builds deliberately broken variants of our
daemon and shows that each is caught by the tests of the clause it breaks.

Each variant is a description in this folder (`NN-name.toml`, describe.py:
what it changes, inside which function of src/) whose `breaks` names the
clauses it breaks:

    breaks = ["SB-6.1.2-1", "SB-6.1.2-2"]

A variant is CAUGHT when the suite exits 1 and at least one failing test
cites one of those clauses (a failure elsewhere only is reported as
"caught elsewhere"). A variant whose clauses are all SHOULD/MAY (SPEC.md)
is caught by a warning on one of them (the suite then exits 0: "caught
(warning)"); a variant that breaks a MUST clause needs a failure. The
modes column lists the modes of the tests that caught it. Output: a table and
the catch rate, also written to <report-dir>/mutants.md and mutants.json.

usage: conformance/mutants/run_mutants.py [--build-dir build] [--only NAME...]
       [--report-dir build/mutants] [--jobs 2] [--focus]
--focus runs only the tests citing the variant's clauses (fast); without
it the whole suite runs against every variant.
"""
import argparse
import fnmatch
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
import describe  # noqa: E402
from clauses_check import parse_spec  # noqa: E402


def breaks_a_must(patterns: list[str]) -> bool:
    """Whether a clause the variant names (globs allowed) is MUST or MUST NOT."""
    return any(c["level"] in ("MUST", "MUST NOT") and fnmatch.fnmatchcase(c["id"], pat)
               for c in parse_spec(str(ROOT / "SPEC.md")) for pat in patterns)


def build_variant(mutant: describe.Mutant, work: Path) -> Path | None:
    src = work / "tree"
    shutil.copytree(ROOT / "src", src / "src")
    shutil.copytree(ROOT / "cmake", src / "cmake")
    # CMakeLists.txt and what it reads at configure time (VERSION, LICENSE, ...)
    for f in ROOT.iterdir():
        if f.is_file():
            shutil.copy(f, src)
    describe.apply(mutant, src / "src")
    b = work / "build"
    for cmd in (["cmake", "-S", str(src), "-B", str(b), "-DSB_TESTS=OFF",
                 "-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
                ["cmake", "--build", str(b), "--target", "stdio_bus", "-j2"]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            print(f"  build failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
            return None
    return b / "stdio_bus"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=str(ROOT / "build"))
    ap.add_argument("--report-dir", default=None)
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--jobs", default="2")
    ap.add_argument("--focus", action="store_true")
    args = ap.parse_args()
    build = Path(args.build_dir).resolve()
    report_dir = Path(args.report_dir or build / "mutants").resolve()
    report_dir.mkdir(parents=True, exist_ok=True)
    mock = build / "mock_workers" / "mock_worker"
    paths = describe.mutant_paths()
    if args.only:
        paths = [p for p in paths if any(o in p.name for o in args.only)]
    if not paths:
        print("no variants selected")
        return 2

    rows = []
    for path in paths:
        try:
            mutant = describe.load(path)
        except describe.MutantError as exc:
            print(f"== {exc}", flush=True)
            rows.append({"variant": path.stem, "breaks": [], "outcome": "does not apply", "failing": [],
                         "seconds": 0})
            continue
        clauses = mutant.breaks
        print(f"== {mutant.name}: breaks {' '.join(clauses)}", flush=True)
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="sb-mutant-") as tmp:
            try:
                binary = build_variant(mutant, Path(tmp))
            except describe.MutantError as exc:  # its description no longer matches src/
                print(f"  {exc}", flush=True)
                binary, outcome = None, "does not apply"
            else:
                outcome = "build-error"
            if binary is None:
                rows.append({"variant": mutant.name, "breaks": clauses, "outcome": outcome,
                             "failing": [], "seconds": 0})
                continue
            out = report_dir / mutant.name
            # our profile: a daemon built elsewhere than build/ gets the neutral one by default
            cmd = [sys.executable, str(ROOT / "conformance" / "run.py"), "--daemon", str(binary),
                   "--profile", str(ROOT / "conformance" / "profiles" / "stdio_bus.toml"),
                   "--mock-worker", str(mock), "--report-dir", str(out), "-q", "-j", args.jobs,
                   "--no-coverage-gate"]
            if args.focus:
                for c in clauses:
                    cmd += ["--clause", c]
            r = subprocess.run(cmd, capture_output=True, text=True)
        results = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {}
        failing = [t for t in results.get("tests", []) if t.get("outcome") in ("fail", "warn")]
        hit = [t for t in failing
               if any(fnmatch.fnmatch(c, pat) for c in t.get("clauses", []) for pat in clauses)]
        if r.returncode == 1 and hit:
            outcome = "caught"
        elif r.returncode == 0 and hit and not breaks_a_must(clauses):  # warnings only
            outcome = "caught (warning)"
        elif r.returncode == 1:
            outcome = "caught elsewhere"
        elif r.returncode == 0:
            outcome = "MISSED"
        else:
            outcome = f"harness exit {r.returncode}"
        modes = sorted({t.get("mode") or "-" for t in hit},
                       key=lambda m: ("stdio", "unix", "tcp", "-").index(m))
        rows.append({"variant": mutant.name, "breaks": clauses, "outcome": outcome,
                     "modes": modes, "failing": [t["nodeid"] for t in hit or failing][:5],
                     "seconds": round(time.monotonic() - t0, 1)})
        print(f"   {outcome} ({rows[-1]['seconds']} s; modes {','.join(modes) or '-'}): "
              f"{', '.join(rows[-1]['failing'][:3])}", flush=True)

    caught = sum(r["outcome"] in ("caught", "caught (warning)") for r in rows)
    lines = ["# Broken variants", "",
             f"{caught} of {len(rows)} variants caught by the tests of the clause they break.", "",
             "| variant | breaks | outcome | modes | failing tests (first) | s |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['variant']} | {' '.join(r['breaks'])} | {r['outcome']} | "
                     f"{' '.join(r.get('modes', []))} | {'<br>'.join(r['failing'][:2])} | {r['seconds']} |")
    (report_dir / "mutants.md").write_text("\n".join(lines) + "\n")
    (report_dir / "mutants.json").write_text(json.dumps(rows, indent=2))
    print("\n".join(lines[2:3]))
    print(f"catch rate: {caught}/{len(rows)}")
    return 0 if caught == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
