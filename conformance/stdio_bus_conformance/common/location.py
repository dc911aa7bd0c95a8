"""Where the suite is: the directory holding run.py, pytest.ini, conftest.py,
tests/, worker_tests/, profiles/ (and, once installed, SPEC.md,
WORKER_SPEC.md and VERSION).

    source tree       conformance/ (this package's parent; SPEC.md one level up)
    cmake --install   <prefix>/share/stdio_bus/conformance/ (the same layout)
    pip install       <site-packages>/stdio_bus_conformance/_suite/, put there by
                      the package's build (conformance/setup.py), since a Python
                      package can only ship files inside itself
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
_BUNDLED = PACKAGE_DIR / "_suite"

SUITE_DIR = _BUNDLED if (_BUNDLED / "pytest.ini").is_file() else PACKAGE_DIR.parent
