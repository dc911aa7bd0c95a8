"""End-to-end tests of our daemon (build/stdio_bus) with real worker processes.

These test the reference daemon as a program, extensions included; the
clause-by-clause judgement of any daemon lives in conformance/.
"""
import json
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_addoption(parser):
    parser.addoption("--build-dir", default=str(ROOT / "build"),
                     help="CMake build directory holding stdio_bus and mock_workers/")


@pytest.fixture(scope="session")
def build_dir(request):
    return Path(request.config.getoption("--build-dir")).resolve()


@pytest.fixture(scope="session")
def daemon_bin(build_dir):
    path = build_dir / "stdio_bus"
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built")
    return str(path)


@pytest.fixture(scope="session")
def mock_bin(build_dir):
    path = build_dir / "mock_workers" / "mock_worker"
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built")
    return str(path)


@pytest.fixture
def write_config(tmp_path):
    """Writes a config dict (or raw text) to a file and returns its path."""
    counter = [0]

    def write(config):
        counter[0] += 1
        path = tmp_path / f"config{counter[0]}.json"
        path.write_text(config if isinstance(config, str) else json.dumps(config))
        return str(path)

    return write
