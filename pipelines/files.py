"""Atomic file writes: a crash, a Ctrl-C or an error never leaves a half-written file.

Every file the project writes for users (vocabularies, n-gram models, ARPA
exports, weights, metrics, tables, plots) goes through here: it is written
under a temporary name beside its final path and renamed only when complete,
so the previous version stays intact until the new one is whole. The lowest
layer (`pipelines/`) holds it so every package can use it.
"""

from __future__ import annotations

import contextlib
import os
from typing import Callable, Iterator

TMP_PREFIX = ".tmp-"


def temporary_name(path: str) -> str:
    """The name `path` is written under until it is complete.

    It keeps the file's suffix, which some writers check or add (Keras's
    `.weights.h5` and `.keras`, numpy's `.npz`, matplotlib's `.png`).
    """
    directory, name = os.path.split(path)
    return os.path.join(directory, TMP_PREFIX + name)


@contextlib.contextmanager
def atomic_output(path: str) -> Iterator[str]:
    """Yields a temporary name to write; on success it becomes `path`.

    If the block raises (KeyboardInterrupt included), the temporary file is
    removed and `path` is left as it was.
    """
    tmp = temporary_name(path)
    try:
        yield tmp
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    os.replace(tmp, path)


def replace_atomically(path: str, write: Callable[[str], None]) -> None:
    """Calls `write(tmp)` for a temporary name beside `path`, then renames it to `path`."""
    with atomic_output(path) as tmp:
        write(tmp)


def write_text(path: str, text: str) -> None:
    """Writes UTF-8 text atomically."""
    with atomic_output(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
