"""Selection: --clause globs, --section prefixes, --exclude-clause, -k."""

import pytest


def names(run):
    return sorted({n.split("::")[1].split("[")[0] for n in run.outcomes})


@pytest.mark.parametrize("args, expected", [
    (["--clause", "SB-4.*"], ["test_malformed_line_closes_the_client", "test_malformed_line_is_logged"]),
    (["--clause", "SB-I-1", "--clause", "SB-6.1-2"], ["test_non_object_closes_the_client", "test_round_robin"]),
    (["--section", "6.1"], ["test_response_reaches_the_client", "test_round_robin"]),
    (["--section", "6"], ["test_response_reaches_the_client", "test_round_robin"]),
    (["--section", "I"], ["test_non_object_closes_the_client"]),
    (["--exclude-clause", "SB-4.*", "--exclude-clause", "SB-6.1-1"],
     ["test_non_object_closes_the_client", "test_round_robin"]),
    (["-k", "round_robin or non_object"], ["test_non_object_closes_the_client", "test_round_robin"]),
])
def test_selection(harness, args, expected):
    run = harness(*args)
    assert run.rc == 0, run.output
    assert names(run) == expected
    assert run.results["coverage"]["gate"]["ok"]  # coverage still counts the whole suite


def test_section_does_not_match_a_longer_number(harness):
    run = harness("--section", "6.10")
    assert run.rc == 2 and run.results["summary"]["total"] == 0
