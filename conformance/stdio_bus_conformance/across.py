"""Across runs, from their report folders (no test is run): run.py --compare
OLD_DIR NEW_DIR and run.py --matrix RUN_DIR... --report-dir OUT. Reads each
folder's results.json, hands the data to reports/compare.py or
reports/matrix.py, and writes what they draw."""

from __future__ import annotations

import json
import os

from .reports import compare as cmp
from .reports import matrix
from .reports.html import write_html


def read_run(folder: str) -> tuple[dict | None, str]:
    """A run's results.json data, or None and why it could not be read."""
    path = os.path.join(folder, "results.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f), ""
    except FileNotFoundError:
        return None, f"no results.json in {folder}"
    except (OSError, ValueError) as exc:
        return None, f"{path}: {exc}"


def compare_runs(old_dir: str, new_dir: str, out_dir: str | None) -> int:
    """Console lines, OUT/compare.md (OUT: NEW_DIR unless given) and the
    comparison in NEW_DIR/report.html. Exit 1 when a clause newly fails,
    2 when a run cannot be read, else 0."""
    old, why_old = read_run(old_dir)
    new, why_new = read_run(new_dir)
    if old is None or new is None:
        print(f"run.py --compare: {why_old or why_new}")
        return 2
    diff = cmp.compare(old, new, old_dir, new_dir)
    for line in cmp.lines(diff):
        print(line)
    out_dir = out_dir or new_dir
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "compare.md"), "w", encoding="utf-8") as f:
        f.write(cmp.compare_md(diff))
    write_html(os.path.join(new_dir, "report.html"), new, new_dir, diff)
    print(f"written: {os.path.join(out_dir, 'compare.md')}, {os.path.join(new_dir, 'report.html')} "
          "(its section 'Changes since')")
    return 1 if diff["newly_failing"] else 0


def matrix_runs(specs: list[str], out_dir: str) -> int:
    """specs: RUN_DIR or NAME=RUN_DIR each. A folder without results.json is
    a column that says so (a CI run that did not happen); exit 2 when no run
    could be read, else 0."""
    runs, taken = [], set()
    for spec in specs:
        name, sep, folder = spec.partition("=")
        if not sep or os.path.isdir(spec):
            name, folder = "", spec
        data, why = read_run(folder)
        if data is None:
            name = name or os.path.basename(os.path.normpath(folder))
            taken.add(name)
            print(f"run.py --matrix: {name}: {why} (shown as missing)")
            runs.append({"name": name, "dir": folder, "missing": why})
            continue
        name = name or matrix.name_of(data, folder, taken)
        taken.add(name)
        link = os.path.relpath(os.path.join(folder, "report.html"), out_dir)
        if not os.path.exists(os.path.join(folder, "report.html")):
            write_html(os.path.join(folder, "report.html"), data, folder)  # a run from before report.html
        runs.append({"name": name, "dir": folder, "link": link.replace(os.sep, "/"), "data": data})
    if not any(r.get("data") for r in runs):
        print("run.py --matrix: no run could be read")
        return 2
    m = matrix.write(out_dir, runs)
    print(f"matrix: {len(m['rows'])} clauses x {len(m['columns'])} implementations: "
          f"{os.path.join(out_dir, 'matrix.html')}, matrix.md")
    return 0
