"""The pytest plugin (`-p stdio_bus_conformance.plugin`): pytest finds its
hooks and fixtures in this module's namespace; the State (state.py) is
registered as a second plugin by pytest_configure."""

from .fixtures import bus, rng, sb_mode, worker  # noqa: F401
from .hooks import pytest_addoption, pytest_configure  # noqa: F401
