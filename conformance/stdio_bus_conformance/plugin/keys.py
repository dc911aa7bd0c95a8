"""What the fixtures and the report hook tell each other about one test,
kept in the test item's stash (never as ad-hoc attributes on the item)."""

import pytest

# a phase of the test failed (set by the report hook; the fixture's teardown then writes a reproducer)
FAILED = pytest.StashKey[bool]()
# what the test's bus saw beside its asserts: floods, truncated artifacts (set by the fixture's
# teardown; the report hook sends them with the teardown report)
FINDINGS = pytest.StashKey[list]()
