"""The test binaries' fork server (`tests/forkserver.py`) against a fresh interpreter: same exit status,
output, input, environment, working directory and time limit."""

import os
import signal
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
    open("sleeping", "w").close()
    time.sleep(30)
if line == "raise":
    raise ValueError("probe failed")
if line == "meet":  # leave a mark, then wait for the other probe's
    import time
    open(sys.argv[1], "w").close()
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.01)
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


def test_forked_binaries_run_side_by_side_and_end_in_any_order(probe):
    """Two workers of one job each wait for the other: only children that run at the same time both end."""
    first = helpers.start_binary("probe_module", "a.mark", "b.mark", cwd=str(probe), input="meet\n")
    second = helpers.start_binary("probe_module", "b.mark", "a.mark", cwd=str(probe), input="meet\n")
    sleeper = helpers.start_binary("probe_module", cwd=str(probe), input="sleep\n")
    assert second.communicate(timeout=60)[0].startswith("argv ['b.mark', 'a.mark']")
    assert first.communicate(timeout=60)[0].startswith("argv ['a.mark', 'b.mark']")
    assert first.returncode == second.returncode == 0
    assert sleeper.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.wait(timeout=0.5)
    sleeper.kill()
    assert sleeper.wait(timeout=30) == -9


@pytest.mark.parametrize("number", [2, 15])  # SIGINT: a KeyboardInterrupt in the binary; SIGTERM ends it
def test_a_signalled_forked_binary_ends_as_a_fresh_one_does(number, probe, monkeypatch):
    import time

    ended = []
    for fresh in (False, True):
        if fresh:
            monkeypatch.setenv("NPLM_TF_TESTS_FRESH", "1")
        mark = probe / "sleeping"
        mark.unlink(missing_ok=True)
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (binaries_test)
        try:
            process = helpers.start_binary("probe_module", cwd=str(probe), input="sleep\n")
        finally:
            signal.signal(signal.SIGINT, previous)
        deadline = time.time() + 60
        while not mark.exists():
            assert time.time() < deadline and process.poll() is None, "the probe never began its sleep"
            time.sleep(0.01)
        process.send_signal(number)
        last = process.communicate(timeout=30)[1].splitlines()[-1]
        ended.append((process.returncode, last if number == signal.SIGINT else None))
    assert ended[0] == ended[1] == (-number, "KeyboardInterrupt" if number == signal.SIGINT else None), ended
