"""The pytest plugin (`-p stdio_bus_conformance.plugin`): pytest finds its
hooks and fixtures in this module's namespace."""

from .hooks import (State, bus, pytest_addoption, pytest_configure, rng, sb_mode,  # noqa: F401
                    worker)
