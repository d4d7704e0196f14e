"""One formatter for the whole tree: ruff, configured in ruff.toml."""

import shutil
import subprocess
import sys

import pytest

from tests import helpers


def ruff(*args, cwd=helpers.ROOT):
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=cwd, capture_output=True, text=True)


@pytest.fixture(scope="module", autouse=True)
def installed():
    if ruff("--version").returncode != 0:
        pytest.fail("ruff is not installed; install the test extras: pip install -e '.[test]'")


def test_the_tree_is_formatted():
    result = ruff("format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_tree_passes_the_linter():
    result = ruff("check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_unformatted_file_is_caught(tmp_path):
    shutil.copy(f"{helpers.ROOT}/ruff.toml", tmp_path / "ruff.toml")
    (tmp_path / "ugly.py").write_text("x = {  'a':1 }\n")
    assert ruff("format", "--check", ".", cwd=tmp_path).returncode != 0
    (tmp_path / "ugly.py").write_text('x = {"a": 1}\n')
    assert ruff("format", "--check", ".", cwd=tmp_path).returncode == 0
