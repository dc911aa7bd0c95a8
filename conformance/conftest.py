"""pytest entry point of the conformance suite, for `pytest conformance/tests`.

The plugin itself (options, markers, the `bus` fixture, outcome mapping,
baseline, coverage, reports) is stdio_bus_conformance/plugin/; run.py loads
it with -p. This file loads it when pytest is run directly, and does nothing
when it is already there (run.py, or this file reached a second way)."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

PLUGIN = "stdio_bus_conformance.plugin"


def pytest_addoption(parser, pluginmanager):
    # Registering the plugin here (not with pytest_plugins, which pytest
    # refuses in a conftest it loads late) replays its own pytest_addoption.
    if not pluginmanager.has_plugin(PLUGIN):
        pluginmanager.import_plugin(PLUGIN)
