"""The run's reports: results.json (results_json.py), junit.xml (junit.py),
report.md (markdown.py) and report.html (html.py, from results.json's data
and the failing tests' reproducer files), all written from one RunSummary
(summary.py) by the controlling process; the console's lines are in
console.py."""

from __future__ import annotations

import os

from .html import write_html
from .junit import write_junit
from .markdown import write_md
from .results_json import results_json, write_json
from .summary import RunSummary


def write_all(report_dir: str, s: RunSummary) -> dict:
    os.makedirs(report_dir, exist_ok=True)
    paths = {name: os.path.join(report_dir, name) for name in ("results.json", "junit.xml", "report.md",
                                                                "report.html")}
    write_json(paths["results.json"], s)
    write_junit(paths["junit.xml"], s)
    write_md(paths["report.md"], s)
    write_html(paths["report.html"], results_json(s), report_dir)
    return paths
