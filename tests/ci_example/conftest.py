from pathlib import Path

import pytest


def pytest_addoption(parser):
    parser.addoption("--build-dir", default=str(Path(__file__).resolve().parents[2] / "build"),
                     help="the CMake build tree to package")


@pytest.fixture(scope="session")
def build_dir(request):
    return Path(request.config.getoption("--build-dir")).resolve()
