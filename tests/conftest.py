"""Two tiers, and the suite's order, both from the tests' own code.

A test is `slow` when it, or a fixture it uses, runs a binary, trains, or builds a model or an n-gram from a
corpus (`SLOW_CALLS` in their source); `pytest -m "not slow"` is the fast tier of unit tests. The README's
test command runs every file on two pytest-xdist workers, a file to a worker (`--dist loadfile`); the files
with the most slow tests start first, so that the two workers end within a small file of each other.
"""

import inspect
import os
import tempfile

import pytest

SLOW_CALLS = (
    "run_binary(",
    "subprocess.",
    "Popen(",
    "train_and_evaluate(",
    "train_ngram(",
    "import_arpa(",
    ".fit(",
    "run_search(",
    "tuner.",
    "run_table(",
)


# Warnings that TensorFlow's, Keras's and matplotlib's own code raises on every call, hundreds a run, which
# would bury any of the project's: TensorFlow tensors' __array__ without numpy 2's `copy`, and matplotlib's
# calls to pyparsing's old names.
THIRD_PARTY_WARNINGS = (
    "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning",
    "ignore::DeprecationWarning:matplotlib",
)


def pytest_configure(config):
    # The reading tools keep mixture fits in the user's cache (`nplm_tf.tools.fit_cache`): never the real one
    # here, and each test its own (`own_fit_cache`), so that no test is served another's fit.
    os.environ["NPLM_TF_CACHE"] = tempfile.mkdtemp(prefix="nplm_tf_fit_cache_")
    config.addinivalue_line("markers", 'slow: runs a binary or trains; pytest -m "not slow" is the fast tier')
    for line in THIRD_PARTY_WARNINGS:
        config.addinivalue_line("filterwarnings", line)
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist's: sort the files by number of tests
        config.option.loadscopereorder = False


def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def is_slow(item) -> bool:
    """Whether the test, a fixture it uses (its closure), or a function of its own module that either calls
    (followed to the end), calls one of `SLOW_CALLS`."""
    sources = [_source(getattr(item, "function", None))]
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        for definition in info.name2fixturedefs.get(name, ()) if info else ():
            sources.append(_source(definition.func))
    module = getattr(item, "module", None)
    local = {
        name: obj
        for name, obj in (vars(module).items() if module else ())
        if inspect.isfunction(obj) and obj.__module__ == module.__name__ and not name.startswith("test_")
    }
    seen: set[str] = set()
    while True:
        called = {name for name in local if name not in seen and any(f"{name}(" in src for src in sources)}
        if not called:
            break
        seen |= called
        sources += [_source(local[name]) for name in called]
    return any(call in source for source in sources for call in SLOW_CALLS)


def pytest_collection_modifyitems(items):
    slow_in_file: dict[str, int] = {}
    for item in items:
        if is_slow(item):
            item.add_marker(pytest.mark.slow)
            slow_in_file[item.path.name] = slow_in_file.get(item.path.name, 0) + 1
    items.sort(key=lambda item: -slow_in_file.get(item.path.name, 0))  # stable: a file's tests in order


@pytest.fixture(autouse=True)
def own_fit_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("NPLM_TF_CACHE", str(tmp_path_factory.mktemp("fit_cache")))
