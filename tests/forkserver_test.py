"""The test binaries' fork server (`tests/forkserver.py`) against a fresh interpreter: same exit status,
output, input, environment, working directory and time limit."""

import os
import subprocess

import pytest

from tests import helpers

PROBE = """
import os, sys
line = sys.stdin.readline().strip()
print("argv", sys.argv[1:], "stdin", line, "env", os.environ.get("PROBE_VALUE"), "cwd", os.getcwd())
print("to stderr", file=sys.stderr)
print("tensorflow loaded:", "tensorflow" in sys.modules, file=sys.stderr)
if line == "sleep":
    import time
    time.sleep(30)
if line == "raise":
    raise ValueError("probe failed")
sys.exit(int(line) if line.isdigit() else 0)
"""


@pytest.fixture(autouse=True)
def forked(monkeypatch):
    """This file tests the server itself: its runs are forked even where NPLM_TF_TESTS_FRESH=1 asks the
    rest of the suite for fresh interpreters."""
    monkeypatch.delenv("NPLM_TF_TESTS_FRESH", raising=False)


@pytest.fixture
def probe(tmp_path):
    (tmp_path / "probe_module.py").write_text(PROBE, encoding="utf-8")
    return tmp_path


def both(monkeypatch, *args, **kwargs):
    forked = helpers.run_binary(*args, **kwargs)
    monkeypatch.setenv("NPLM_TF_TESTS_FRESH", "1")
    fresh = helpers.run_binary(*args, **kwargs)
    monkeypatch.delenv("NPLM_TF_TESTS_FRESH")
    return forked, fresh


@pytest.mark.parametrize("line", ["0", "3", "raise"])
def test_a_forked_binary_answers_as_a_fresh_interpreter_does(line, probe, monkeypatch):
    forked, fresh = both(
        monkeypatch, "probe_module", "--flag=1", "x y", cwd=str(probe), input=line + "\n", env={"PROBE_VALUE": "v"}
    )
    assert forked.returncode == fresh.returncode == {"0": 0, "3": 3, "raise": 1}[line]
    assert forked.stdout == fresh.stdout
    assert f"stdin {line} env v cwd {probe}" in forked.stdout and "['--flag=1', 'x y']" in forked.stdout
    assert forked.stderr.splitlines()[0] == fresh.stderr.splitlines()[0] == "to stderr"
    assert "tensorflow loaded: True" in forked.stderr and "tensorflow loaded: False" in fresh.stderr
    if line == "raise":  # the traceback of an uncaught exception, as the interpreter prints it
        assert forked.stderr.splitlines()[-1] == fresh.stderr.splitlines()[-1] == "ValueError: probe failed"


def test_a_project_binary_forked_and_fresh_gives_the_same_help_and_refusal(monkeypatch):
    forked, fresh = both(monkeypatch, "nplm_tf.runs", "--help")
    assert forked.returncode == fresh.returncode == 0 and forked.stdout == fresh.stdout
    forked, fresh = both(monkeypatch, "nplm_tf.train", "--model_dir=/nonexistent/x", "--epochs=0")
    assert forked.returncode == fresh.returncode != 0
    assert helpers.error_lines(forked.stderr) == helpers.error_lines(fresh.stderr) != []


def test_a_forked_binary_past_its_time_limit_is_killed_and_the_server_goes_on(probe):
    with pytest.raises(subprocess.TimeoutExpired):
        helpers.run_binary("probe_module", cwd=str(probe), input="sleep\n", timeout=2)
    after = helpers.run_binary("probe_module", cwd=str(probe), input="5\n")
    assert after.returncode == 5


def test_a_run_that_must_not_load_tensorflow_gets_a_fresh_interpreter(tmp_path, probe):
    forked = helpers.run_binary("probe_module", cwd=str(probe), input="0\n")
    assert "tensorflow loaded: True" in forked.stderr  # the server's child: TensorFlow came with the fork
    env = helpers.without_tensorflow(tmp_path)
    env["PYTHONPATH"] += os.pathsep + str(probe)
    fresh = helpers.run_binary("probe_module", cwd=str(probe), input="0\n", env=env)
    assert fresh.returncode == 0 and "tensorflow loaded: False" in fresh.stderr, fresh.stderr
