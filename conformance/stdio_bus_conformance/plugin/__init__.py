"""The pytest plugin (`-p stdio_bus_conformance.plugin`): pytest finds its
hooks and fixtures in this module's namespace; pytest_configure (hooks.py)
registers each role of the run (subjects, artifacts, selection, results,
finish) as a plugin of its own and publishes it in config.stash (keys.py)."""

from .fixtures import bus, rng, sb_mode, worker  # noqa: F401
from .hooks import pytest_addoption, pytest_configure  # noqa: F401
