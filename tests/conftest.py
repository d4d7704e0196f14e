"""The suite's order: the files that run the binaries end to end start first.

The README's test command runs the files on two pytest-xdist workers, a file to a worker (`--dist
loadfile`), handing out the next file as a worker frees up. xdist orders the files by their number of
tests, which left a long file (tuning_test.py, 90 s) to start near the end while the other worker ran out
of work. Longest first, the two workers end within a small file of each other.
"""

# The slowest files, slowest first (pytest --junitxml's times summed per file on 2026-11-27: 289, 249, 187,
# 158, 130, 105, 95, 67, 28, 23, 19 and 12 s of the suite's 1,380 s); the other files, of 4 s or less, follow.
SLOWEST_FIRST = (
    "binaries_test.py",
    "multi_worker_test.py",
    "large_vocab_test.py",
    "tools_test.py",
    "export_test.py",
    "tuning_test.py",
    "trainer_test.py",
    "benchmarks_test.py",
    "ngram_test.py",
    "generalization_test.py",
    "reproduce_test.py",
    "shortlist_bound_test.py",
)


# Warnings that TensorFlow's, Keras's and matplotlib's own code raises on every call, hundreds a run, which
# would bury any of the project's: TensorFlow tensors' __array__ without numpy 2's `copy`, and matplotlib's
# calls to pyparsing's old names.
THIRD_PARTY_WARNINGS = (
    "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning",
    "ignore::DeprecationWarning:matplotlib",
)


def pytest_configure(config):
    for line in THIRD_PARTY_WARNINGS:
        config.addinivalue_line("filterwarnings", line)
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist's: sort the files by number of tests
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOWEST_FIRST)))  # stable: a file's tests in order
