"""The self-tests' validators of the harness's reports, done by what Debian
ships rather than by hand: results.json against results.schema.json with
python3-jsonschema (full Draft 2020-12: $ref, oneOf, minItems, patterns...),
junit.xml against the Jenkins xunit plugin's junit-10.xsd (data/, vendored)
with xmllint from libxml2-utils. Each returns a list of problems, empty when
the document is valid; a missing tool fails the test with the package to
install (a validation skipped is no validation)."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SCHEMA = HERE.parent / "results.schema.json"
JUNIT_XSD = HERE / "data" / "junit-10.xsd"


def _jsonschema():
    try:
        import jsonschema
    except ImportError:
        pytest.fail("python3-jsonschema is missing (apt-get install python3-jsonschema; ci/install-deps.sh)")
    return jsonschema


def results_problems(data: dict, schema_path: Path = SCHEMA) -> list[str]:
    """Problems of a results.json document against results.schema.json."""
    jsonschema = _jsonschema()
    schema = json.loads(schema_path.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)  # the schema itself is valid for the draft it names
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '$'}: {e.message}"
            for e in sorted(cls(schema).iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))]


def junit_problems(path, xsd: Path = JUNIT_XSD) -> list[str]:
    """Problems xmllint finds in a JUnit XML file against junit-10.xsd."""
    xmllint = shutil.which("xmllint")
    if xmllint is None:
        pytest.fail("xmllint is missing (apt-get install libxml2-utils; ci/install-deps.sh)")
    p = subprocess.run([xmllint, "--noout", "--schema", str(xsd), str(path)],
                       capture_output=True, text=True, timeout=60)
    if p.returncode == 0:
        return []
    return [line for line in p.stderr.splitlines() if line.strip() and not line.endswith(" validates")] \
        or [f"xmllint exit {p.returncode}"]
