"""CLI (spec 4.1.1, 9.1) and config validation at start-up (spec 9.3, SB-I-20)."""
import os
import re
import subprocess

import pytest


def run(argv, timeout=10):
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)


def test_help_prints_usage_and_exits_zero(daemon_bin):
    r = run([daemon_bin, "--help"])
    assert r.returncode == 0
    assert b"--config <path>" in r.stdout and b"--unix <path>" in r.stdout and b"--tcp <host:port>" in r.stdout


def test_version(daemon_bin):
    r = run([daemon_bin, "--version"])
    assert r.returncode == 0 and re.fullmatch(rb"stdio_bus \d+\.\d+\.\d+ \(stdio Bus spec v0\.1\.0\)\n", r.stdout)


@pytest.mark.parametrize("argv, reason", [
    ([], b"--config <path> is required"),
    (["--config"], b"--config: missing value"),
    (["--config", "x.json", "--bogus"], b"--bogus: unknown option"),
    (["--config", "x.json", "--unix"], b"--unix: missing value"),
    (["--config", "x.json", "--tcp", "nohostport"], b"is not host:port"),
    (["--config", "x.json", "--tcp", "127.0.0.1:99999"], b"is not host:port"),
    (["--config", "x.json", "--stdio", "--unix", "/tmp/x"], b"only one of"),
    (["--config", "x.json", "--log-level", "loud"], b"--log-level"),
])
def test_bad_command_line_gets_usage_and_nonzero_exit(daemon_bin, argv, reason):
    r = run([daemon_bin] + argv)
    assert r.returncode == 2
    assert reason in r.stderr
    assert b"usage: stdio_bus" in r.stderr
    assert r.stdout == b""


def pool(**kw):
    p = {"id": "p", "command": "/bin/cat", "instances": 1}
    p.update(kw)
    return p


BAD_CONFIGS = [
    # SB-9.3-1: at least one pool
    ({"limits": {}}, "pools: required"),
    ({"pools": {}}, "pools: must be an array"),
    ({"pools": []}, "pools: must contain at least one pool"),
    ({"pools": [7]}, "pools[0]: must be an object"),
    # SB-9.3-2: unique ids
    ({"pools": [pool(), pool()]}, 'pools[1].id: "p" is already used by pools[0]'),
    ({"pools": [pool(id="")]}, "pools[0].id: must be a non-empty string"),
    ({"pools": [{"command": "/bin/cat", "instances": 1}]}, "pools[0].id: required"),
    # SB-9.3-3: a valid command path
    ({"pools": [pool(command="/nonexistent/worker")]}, 'pools[0].command: "/nonexistent/worker" is not an executable file'),
    ({"pools": [pool(command="/tmp")]}, "pools[0].command"),
    ({"pools": [pool(command="no-such-program-xyz")]}, "pools[0].command: \"no-such-program-xyz\" is not an executable file on PATH"),
    ({"pools": [pool(command=5)]}, "pools[0].command: must be a non-empty string"),
    ({"pools": [{"id": "p", "instances": 1}]}, "pools[0].command: required"),
    # SB-9.3-4: instances >= 1
    ({"pools": [pool(), pool(id="q", instances=0)]}, "pools[1].instances: must be an integer >= 1"),
    ({"pools": [pool(instances=1.5)]}, "pools[0].instances: must be an integer >= 1"),
    ({"pools": [pool(instances="2")]}, "pools[0].instances: must be an integer >= 1"),
    ({"pools": [{"id": "p", "command": "/bin/cat"}]}, "pools[0].instances: required"),
    # args and limits
    ({"pools": [pool(args="-v")]}, "pools[0].args: must be an array of strings"),
    ({"pools": [pool(args=["a", 3])]}, "pools[0].args[1]: must be a string"),
    ({"pools": [pool()], "limits": []}, "limits: must be an object"),
    ({"pools": [pool()], "limits": {"max_input_buffer": 0}}, "limits.max_input_buffer: must be an integer"),
    ({"pools": [pool()], "limits": {"max_restarts": -1}}, "limits.max_restarts: must be an integer >= 0"),
    ({"pools": [pool()], "limits": {"drain_timeout_sec": "30"}}, "limits.drain_timeout_sec: must be an integer"),
    ({"pools": [pool()], "orphan_policy": "retry"}, 'orphan_policy: must be "discard" or "error"'),
    ("[1, 2", "(file): not valid JSON near byte"),
    ("[]", "(top level): must be a JSON object"),
]


@pytest.mark.parametrize("config, message", BAD_CONFIGS, ids=[m for _, m in BAD_CONFIGS])
def test_bad_config_exits_nonzero_with_one_line_naming_the_field(daemon_bin, write_config, config, message):
    r = run([daemon_bin, "--config", write_config(config)])
    assert r.returncode != 0
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert "config: " + message in lines[0], lines[0]
    assert r.stdout == b""


def test_command_that_is_not_executable_is_refused(daemon_bin, write_config, tmp_path):
    script = tmp_path / "worker.sh"
    script.write_text("#!/bin/sh\ncat\n")
    script.chmod(0o644)
    r = run([daemon_bin, "--config", write_config({"pools": [pool(command=str(script))]})])
    assert r.returncode != 0
    assert f'config: pools[0].command: "{script}" is not an executable file'.encode() in r.stderr


def test_missing_config_file(daemon_bin, tmp_path):
    r = run([daemon_bin, "--config", str(tmp_path / "absent.json")])
    assert r.returncode != 0
    assert b"cannot open" in r.stderr and b"absent.json" in r.stderr


def test_unknown_keys_are_warned_about_and_ignored(daemon_bin, write_config):
    cfg = {"pools": [pool(extra=1)], "limits": {"max_speed": 9}, "colour": "blue"}
    p = subprocess.Popen([daemon_bin, "--config", write_config(cfg)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(b"", timeout=10)  # stdin EOF: shut down at once
    assert p.returncode == 0, err
    for key in (b"colour", b"pools[0].extra", b"limits.max_speed"):
        assert key + b": unknown key, ignored" in err
    assert out == b""


def test_command_found_on_path(daemon_bin, write_config):
    cfg = {"pools": [pool(command="cat")]}
    p = subprocess.run([daemon_bin, "--config", write_config(cfg)], input=b"",
                       capture_output=True, timeout=10)
    assert p.returncode == 0, p.stderr
    assert b"started /usr/bin/cat" in p.stderr or b"started /bin/cat" in p.stderr
