"""Structural check of a JUnit XML file against the rules of the Jenkins
xunit plugin's junit-10.xsd (the schema Jenkins validates JUnit reports
with): element nesting, required and allowed attributes, the time format.
Returns a list of problems, empty when the file is valid."""

import re
import xml.etree.ElementTree as ET

# element -> (required attributes, optional attributes, allowed children)
RULES = {
    "testsuites": (set(), {"name", "time", "tests", "failures", "errors"}, {"testsuite"}),
    "testsuite": ({"name", "tests", "failures", "errors"},
                  {"group", "time", "skipped", "timestamp", "hostname", "id", "package", "file", "log", "url"},
                  {"testsuite", "properties", "testcase", "system-out", "system-err"}),
    "properties": (set(), set(), {"property"}),
    "property": ({"name", "value"}, set(), set()),
    "testcase": ({"name"}, {"time", "classname", "group"},
                 {"skipped", "error", "failure", "rerunFailure", "rerunError", "flakyFailure",
                  "flakyError", "system-out", "system-err"}),
    "failure": (set(), {"type", "message"}, set()),
    "error": (set(), {"type", "message"}, set()),
    "skipped": (set(), {"type", "message"}, set()),
    "system-out": (set(), set(), set()),
    "system-err": (set(), set(), set()),
}
# SUREFIRE_TIME of junit-10.xsd
TIME = re.compile(r"^(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]*)?$")
COUNTS = re.compile(r"^[0-9]+$")


def check_tree(root: ET.Element) -> list:
    problems = []
    if root.tag not in ("testsuites", "testsuite"):
        problems.append(f"root element is <{root.tag}>, not <testsuites> or <testsuite>")

    def walk(el, path):
        rule = RULES.get(el.tag)
        if rule is None:
            problems.append(f"{path}: unknown element <{el.tag}>")
            return
        required, optional, children = rule
        for a in required - set(el.attrib):
            problems.append(f"{path}: missing required attribute {a}")
        for a in set(el.attrib) - required - optional:
            problems.append(f"{path}: attribute {a} is not allowed on <{el.tag}>")
        if el.tag in ("testsuites", "testsuite") and "time" in el.attrib and not TIME.match(el.attrib["time"]):
            problems.append(f"{path}: time {el.attrib['time']!r} does not match SUREFIRE_TIME")
        for a in ("tests", "failures", "errors", "skipped"):
            if el.tag in ("testsuites", "testsuite") and a in el.attrib and not COUNTS.match(el.attrib[a]):
                problems.append(f"{path}: {a}={el.attrib[a]!r} is not a count")
        if not children and len(el):
            problems.append(f"{path}: <{el.tag}> must not have child elements")
        if el.tag in ("properties", "testsuites") and (el.text or "").strip():
            problems.append(f"{path}: <{el.tag}> must not contain text")
        for i, child in enumerate(el):
            if children and child.tag not in children:
                problems.append(f"{path}: <{child.tag}> is not allowed inside <{el.tag}>")
                continue
            walk(child, f"{path}/{child.tag}[{i}]")

    walk(root, root.tag)
    # the counts must add up (what Jenkins shows)
    for suite in root.iter("testsuite"):
        cases = suite.findall("testcase")
        want = {"tests": len(cases),
                "failures": sum(1 for c in cases if c.find("failure") is not None),
                "errors": sum(1 for c in cases if c.find("error") is not None),
                "skipped": sum(1 for c in cases if c.find("skipped") is not None)}
        for key, n in want.items():
            if key in suite.attrib and suite.attrib[key].isdigit() and int(suite.attrib[key]) != n:
                problems.append(f"testsuite {suite.get('name')}: {key}={suite.attrib[key]} but {n} counted")
    return problems


def check_file(path) -> list:
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        return [f"not well-formed XML: {exc}"]
    return check_tree(root)
