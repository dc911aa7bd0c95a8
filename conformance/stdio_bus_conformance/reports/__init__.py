"""What a run concludes: outcomes and the exit code, coverage, baselines,
and the reports (results.json, junit.xml, report.md, console lines)."""
