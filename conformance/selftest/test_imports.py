"""The harness package has no import cycle (issue 25): every module of
stdio_bus_conformance can be read knowing only the modules it imports.
Imports inside functions count too (they are how a cycle hides)."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "stdio_bus_conformance"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, name: str) -> set[str]:
    """The package's modules that `path` (module `name`) imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [target] + [f"{target}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        out.update(c for c in candidates if c.split(".")[0] == PKG.name)
    return out


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PKG.rglob("*.py")}
    # an import of a package's name is an import of its __init__; of a name inside a module, of
    # that module
    return {m: {i if i in modules else i.rsplit(".", 1)[0] for i in imports_of(p, m)} & set(modules) - {m}
            for m, p in modules.items()}


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for n in sorted(g.get(m, ())):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(g):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_the_harness_package_has_no_import_cycle():
    g = graph()
    assert len(g) > 40, "the package was not found"
    # a package's __init__ that re-exports its modules is not a cycle with them: drop the edges
    # from an __init__ to its own submodules
    for m in g:
        g[m] = {n for n in g[m] if not n.startswith(m + ".")}
    cycle = find_cycle(g)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
