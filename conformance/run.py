#!/usr/bin/env python3
"""Run the stdio Bus conformance suite: see stdio_bus_conformance/cli.py
(`run.py --help`). This file stays so `conformance/run.py` works from a
checkout or an installed tree without installing the Python package."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from stdio_bus_conformance.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
