"""Build step of the Python package (pyproject.toml holds the metadata).

A Python package ships only what is inside it, and the suite's command runs
the suite: so the build copies the suite into the package, as
stdio_bus_conformance/_suite/ (location.py finds it there):

    from this directory     run.py conftest.py pytest.ini clauses_check.py
                            results.schema.json tests/ worker_tests/ profiles/
    from the top of the     SPEC.md WORKER_SPEC.md VERSION (the single source of
    source tree             the clauses and of the version, never copied in git)

The version of the package is VERSION's. Build from a checkout (pip builds in
place); a tree without ../SPEC.md fails with the missing file named.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
TOP = HERE.parent
SUITE_FILES = ("run.py", "conftest.py", "pytest.ini", "clauses_check.py", "results.schema.json")
SUITE_DIRS = ("tests", "worker_tests", "profiles")
TOP_FILES = ("SPEC.md", "WORKER_SPEC.md", "VERSION")
LEFT_OUT = shutil.ignore_patterns("__pycache__", "*.pyc", "foreign.toml")  # foreign.toml: a self-test's


def top_file(name: str) -> Path:
    path = TOP / name
    if not path.is_file():
        raise SystemExit(f"stdio-bus-conformance: {path} is missing: build the package from a checkout "
                         "of the kit (pip install ./conformance), where it is at the top of the tree")
    return path


class BuildWithSuite(build_py):
    def run(self):
        super().run()
        dest = Path(self.build_lib) / "stdio_bus_conformance" / "_suite"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for name in SUITE_FILES:
            shutil.copy2(HERE / name, dest / name)
        for name in SUITE_DIRS:
            shutil.copytree(HERE / name, dest / name, ignore=LEFT_OUT)
        for name in TOP_FILES:
            shutil.copy2(top_file(name), dest / name)


setup(version=top_file("VERSION").read_text(encoding="utf-8").strip(), cmdclass={"build_py": BuildWithSuite})
