"""Mutants described by what they change (conformance/mutants/describe.py,
issue 33 item 5): a description names the function a change is inside and
the text it replaces, so it survives the function moving to another file
or lines shifting; one that no longer matches fails loudly, naming the
mutant. test_bite.py checks every description applies to src/ as it is."""

import re
import shutil
import sys
from pathlib import Path

import pytest

from conftest import CONFORMANCE

sys.path.insert(0, str(CONFORMANCE / "mutants"))
import describe  # noqa: E402
from stdio_bus_conformance.reports import bite  # noqa: E402

SRC = CONFORMANCE.parent / "src"


def mutant(prefix: str) -> describe.Mutant:
    (path,) = (CONFORMANCE / "mutants").glob(f"{prefix}-*.toml")
    return describe.load(path)


def definition(files: dict, name: str) -> tuple[Path, str]:
    """The file that defines function name, and its definition's text."""
    (found,) = [(p, t[f.start:f.end]) for p, t in files.items() for f in describe.functions(t) if f.name == name]
    return found


def moved(files: dict, name: str, to: Path) -> dict:
    """files with function name cut from its file and appended to `to` (a
    text move, as a refactor would do it; nothing is compiled)."""
    files = dict(files)
    (home, f), = [(p, f) for p, t in files.items() for f in describe.functions(t) if f.name == name]
    text = files[home]
    files[home] = text[:f.start] + text[f.end:]
    files[to] = files.get(to, "") + "\n" + text[f.start:f.end]
    return files


# -- a move survives ------------------------------------------------------------------------------
@pytest.mark.parametrize("to", ["route/router.c", "peers/clients_close.c"])
def test_a_mutant_survives_its_function_moving_to_another_file(tmp_path, to):
    """Mutant 72 changes sb_clients_close (src/daemon/clients.c): moved into another
    file, or a new file in a subfolder, it is still found, and changed alike."""
    m = mutant("72")
    assert [c.function for c in m.changes] == ["sb_clients_close"]
    unmoved, shifted = tmp_path / "unmoved" / "src", tmp_path / "moved" / "src"
    for tree in (unmoved, shifted):
        shutil.copytree(SRC, tree)
    home, original = definition(describe.sources(shifted), "sb_clients_close")
    assert home.name == "clients.c"
    for p, text in moved(describe.sources(shifted), "sb_clients_close", shifted / to).items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    assert definition(describe.sources(shifted), "sb_clients_close")[0] == shifted / to

    assert list(describe.apply(m, unmoved)) == [unmoved / "daemon" / "clients.c"]
    assert list(describe.apply(m, shifted)) == [shifted / to]
    _, want = definition(describe.sources(unmoved), "sb_clients_close")
    _, got = definition(describe.sources(shifted), "sb_clients_close")
    assert want != original and got == want


def test_every_mutant_survives_lines_shifting_and_its_functions_moving():
    """For each mutant whose changes are all inside functions: with 40 lines
    added at the top of every file, and then with each function it changes
    moved to a file of its own, it applies and changes those functions
    exactly as on src/ as it is."""
    files = describe.sources(SRC)
    counted = {}
    for t in files.values():
        for f in describe.functions(t):
            counted[f.name] = counted.get(f.name, 0) + 1
    shift = "".join(f"/* a line added above, {k} */\n" for k in range(40))
    shifted_files = {p: shift + t for p, t in files.items()}
    checked = 0
    for path in describe.mutant_paths():
        m = describe.load(path)
        want = describe.applied(m, files)
        assert {p: shift + t for p, t in want.items()} == describe.applied(m, shifted_files), m.name
        names = list(dict.fromkeys(c.function for c in m.changes))
        if None in names or any(counted[n] > 1 for n in names):
            continue  # a file-level change stays in its file; a twice-defined static is not moved
        after = {**files, **want}
        away = files
        for k, n in enumerate(names):
            away = moved(away, n, SRC / "moved" / f"elsewhere_{k}.c")
        got = describe.applied(m, away)
        assert sorted(p.name for p in got) == sorted(f"elsewhere_{k}.c" for k in range(len(names))), m.name
        for n in names:
            assert definition({**away, **got}, n)[1] == definition(after, n)[1], f"{m.name}: {n}"
        checked += 1
    assert checked > 150


# -- a description that no longer matches fails loudly ---------------------------------------------
def write_mutant(folder: Path, name: str, change: str) -> Path:
    p = folder / f"{name}.toml"
    p.write_text('breaks = ["SB-7.2-3"]\n\n[[change]]\n' + change)
    return p


@pytest.mark.parametrize("change,says", [
    ('function = "sb_clients_close"\nfind = """\n        no such line in it;\n"""\nreplace = ""\n',
     ["function sb_clients_close", "occurs 0 times", "no such line in it;"]),
    ('function = "sb_no_such_function"\nfind = """\n    x = 1;\n"""\nreplace = ""\n',
     ["no definition of sb_no_such_function"]),
    ('function = "sb_clients_close"\nfind = """\n    }\n"""\nreplace = ""\n',
     ["function sb_clients_close", "times in it (clients.c:"]),
    ('scope = "file-level"\nsymbol = "NO_SUCH_MACRO"\nfind = """\n#define NO_SUCH_MACRO 1\n"""\nreplace = ""\n',
     ["file-level NO_SUCH_MACRO", "occurs 0 times"]),
])
def test_a_description_that_does_not_match_fails_naming_the_mutant(tmp_path, change, says):
    p = write_mutant(tmp_path, "99-absent-text", change)
    with pytest.raises(describe.MutantError) as exc:
        describe.applied(describe.load(p), describe.sources(SRC))
    assert "mutant 99-absent-text" in str(exc.value)
    for s in says:
        assert s in str(exc.value)
    assert describe.problems(tmp_path, SRC) == [str(exc.value)]


@pytest.mark.parametrize("text,says", [
    ('[[change]]\nfunction = "f"\nfind = "x\\n"\nreplace = ""\n', "breaks must list"),
    ('breaks = ["SB-1"]\n', "no [[change]]"),
    ('breaks = ["SB-1"]\n[[change]]\nfunction = "f"\nfind = "x"\nreplace = ""\n', "whole lines"),
    ('breaks = ["SB-1"]\n[[change]]\nscope = "file-level"\nsymbol = "Y"\nfind = "x\\n"\nreplace = ""\n',
     "must name its symbol Y"),
    ('breaks = ["SB-1"]\n[[change]]\nfind = "x\\n"\nreplace = ""\n', "names either a function"),
    ('breaks = ["SB-1"]\n[[change]]\nfuction = "f"\nfind = "x\\n"\nreplace = ""\n', "unknown keys ['fuction']"),
])
def test_a_malformed_description_fails_naming_the_mutant(tmp_path, text, says):
    p = tmp_path / "98-malformed.toml"
    p.write_text(text)
    with pytest.raises(describe.MutantError, match=f"mutant 98-malformed.*{re.escape(says)}"):
        describe.load(p)


def test_every_mutant_builds():
    """A replacement that names what a refactor renamed (a field moved to
    another type) applies but does not compile: describe.py --check
    --compile names it, as CI's bite run would, only sooner."""
    assert describe.build_problems(CONFORMANCE / "mutants", SRC) == []


def test_a_replacement_that_does_not_build_is_named(tmp_path):
    write_mutant(tmp_path, "96-names-a-gone-field",
                 'function = "sb_clients_close"\nfind = """\n            close(c->peer.in_fd);\n"""\n'
                 'replace = """\n            close(c->in_fd);\n"""\n')
    (problem,) = describe.build_problems(tmp_path, SRC)
    assert problem.startswith("mutant 96-names-a-gone-field: its replacement does not build")
    assert "clients.c" in problem and "in_fd" in problem


def test_nothing_is_written_unless_every_change_applies(tmp_path):
    shutil.copytree(SRC, tmp_path / "src")
    before = describe.sources(tmp_path / "src")
    p = write_mutant(tmp_path, "97-second-change-absent",
                     'function = "sb_clients_close"\nfind = """\n            close(c->peer.in_fd);\n"""\n'
                     'replace = """\n            (void)0;\n"""\n\n[[change]]\n'
                     'function = "sb_clients_close"\nfind = """\n    not there;\n"""\nreplace = ""\n')
    with pytest.raises(describe.MutantError, match="97-second-change-absent, change 2"):
        describe.apply(describe.load(p), tmp_path / "src")
    assert describe.sources(tmp_path / "src") == before


def test_verify_bites_reports_a_mutant_that_does_not_apply_as_an_error(tmp_path, monkeypatch):
    import verify_bites
    write_mutant(tmp_path, "96-stale", 'function = "sb_clients_close"\nfind = """\n    gone;\n"""\nreplace = ""\n')
    monkeypatch.setattr(verify_bites, "HERE", tmp_path)
    builder = verify_bites.MutantBuilder(tmp_path / "scratch")
    shutil.copytree(SRC, builder.tree / "src")
    builder.ready = True  # the text is refused before anything is built
    row = verify_bites.verify_one(None, builder, "mutant:96-stale",
                                  [bite.Break("SB-7.2-3", "mutant", "96-stale", ["tests/x.py::t"])], tmp_path)
    assert row["missed"] == [] and row["bit"] == []
    assert row["harness"].startswith("does not apply: mutant 96-stale, change 1 (function sb_clients_close)")


# -- finding functions and text -------------------------------------------------------------------
TRICKY_C = r'''#include <stdio.h>
#define BLOCK(x) do { \
    x; } while (0)
struct pair { int a, b; };
static const char *const names[] = {"{", "}"};
/* not_a_function(void) { */
__attribute__((noinline)) static int first(const char *s) {
    if (s[0] == '{' || s[0] == '}')   /* } */
        return 1;
    return "}"[0] == '}';
}

static int
second(struct pair p)
{
    int x = p.a;
    return x;
}
int declared_only(int);
'''


def test_functions_are_found_by_their_braces_past_strings_comments_and_macros():
    fs = describe.functions(TRICKY_C)
    assert [f.name for f in fs] == ["first", "second"]
    assert TRICKY_C[fs[0].start:fs[0].end].startswith("__attribute__((noinline)) static int first(")
    assert TRICKY_C[fs[1].start:fs[1].end] == "second(struct pair p)\n{\n    int x = p.a;\n    return x;\n}\n"


def test_a_block_reindented_as_a_whole_still_matches(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.c").write_text("int f(int v) {\n    if (v) {\n        v++;\n        v--;\n    }\n    return v;\n}\n")
    m = describe.Mutant("95-reindented", ["SB-1"], [describe.Change(
        function="f", find="v++;\nv--;\n", replace="v += 2;\n  v -= 2;\n")])
    describe.apply(m, src)
    assert (src / "a.c").read_text() == \
        "int f(int v) {\n    if (v) {\n        v += 2;\n          v -= 2;\n    }\n    return v;\n}\n"
