"""The README's two commands: one sets up and trains on Brown, one sets up and runs the tests, and `.ci/run`
runs that second one as written."""

import os

from tests import helpers


def commands(readme: str) -> list[str]:
    """The README's indented command lines that start by making the virtual environment, in order."""
    return [line.strip() for line in readme.splitlines() if line.startswith("    python3 -m venv .venv")]


def readme() -> str:
    return open(os.path.join(helpers.ROOT, "README.md"), encoding="utf-8").read()


def test_the_readme_gives_the_main_job_and_the_test_command():
    main, test = commands(readme())  # exactly two
    assert "-m nplm_tf.train " in main and "NLTK_DATA=../shared/nltk_data" in main
    assert " -m pytest " in test and test.endswith(" tests") and "'.[test]'" in test


def test_ci_runs_the_readmes_test_command_as_written():
    _, test = commands(readme())
    ci = open(os.path.join(helpers.ROOT, ".ci", "run"), encoding="utf-8").read()
    assert test in ci.splitlines()
    assert os.access(os.path.join(helpers.ROOT, ".ci", "run"), os.X_OK)


def test_the_readmes_later_test_line_is_the_same_pytest_call():
    """The "Tests, formatting and benchmarks" section repeats the pytest call for a made environment."""
    text = readme()
    _, test = commands(text)
    pytest_call = test[test.index("NLTK_DATA=") :]
    section = text[text.index("## Tests, formatting and benchmarks") :]
    assert pytest_call in [line.strip() for line in section.splitlines()]
