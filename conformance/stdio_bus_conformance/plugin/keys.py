"""The stash keys of the plugin, pytest-xdist's way of sharing data without
ad-hoc attributes.

Per config (set once by hooks.pytest_configure): the Run (state.py), what
the whole run is given, and each role, the only writer of the data it holds;
the other roles and the fixtures read them through these keys.

Per test item: what the fixtures and the report hook tell each other about
one test."""

import pytest

# -- per config: the run and its roles (one plugin each) ------------------------------------
RUN = pytest.StashKey["Run"]()               # state.py: options, registry, baseline, seed (read only)
SUBJECTS = pytest.StashKey["Subjects"]()     # subjects.py: the daemon's or worker's context, the preflight
ARTIFACTS = pytest.StashKey["Artifacts"]()   # artifacts.py: reproducers
SELECTION = pytest.StashKey["Selection"]()   # selection.py: the inventory, what was selected
RESULTS = pytest.StashKey["Results"]()       # results.py: each test's result, the findings
FINISH = pytest.StashKey["Finish"]()         # finish.py: the RunSummary and the reports written

# -- per test item ---------------------------------------------------------------------------
# a phase of the test failed (set by the report hook; the fixture's teardown then writes a reproducer)
FAILED = pytest.StashKey[bool]()
# what the test's bus saw beside its asserts: floods, truncated artifacts (set by the fixture's
# teardown; the report hook sends them with the teardown report)
FINDINGS = pytest.StashKey[list]()
