"""Atomic file writes: a crash, a Ctrl-C or an error never leaves a half-written file.

Every file the project writes for users (vocabularies, n-gram models, ARPA
exports, weights, metrics, tables, plots) goes through here: it is written
under a temporary name beside its final path and renamed only when complete,
so the previous version stays intact until the new one is whole. The lowest
layer (`pipelines/`) holds it so every package can use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import tempfile
import time
from typing import Callable, Iterator

from pipelines.errors import UserError

TMP_PREFIX = ".tmp-"
_STAGING = re.compile(r"^\.[^/]*\.tmp-")  # a directory being written before its rename (SavedModel exports)


def temporary_name(path: str) -> str:
    """The name `path` is written under until it is complete: `.tmp-PID-NAME`.

    It keeps the file's suffix, which some writers check or add (Keras's
    `.weights.h5` and `.keras`, numpy's `.npz`, matplotlib's `.png`), and
    names the process, so that two processes writing one path (the workers of
    a job converting GCIDE into one cache) never write into one file.
    """
    directory, name = os.path.split(path)
    return os.path.join(directory, f"{TMP_PREFIX}{os.getpid()}-{name}")


def is_special_file(path: str) -> bool:
    """Whether `path` exists and is neither a regular file nor a directory (after symlinks): a device, a FIFO,
    a terminal, such as `/dev/stdout` or `/dev/null`. It can only be written in place, never replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


@contextlib.contextmanager
def atomic_output(path: str) -> Iterator[str]:
    """Yields a temporary name to write; on success it becomes `path`.

    If the block raises (KeyboardInterrupt included), the temporary file is
    removed and `path` is left as it was. A special file (`is_special_file`: `--per_token=/dev/stdout`, a
    FIFO) is yielded itself and written in place: renaming over it replaced the device or pipe with a
    regular file (where the directory allowed it, as root in /dev).
    """
    if is_special_file(path):
        yield path
        return
    tmp = temporary_name(path)
    try:
        yield tmp
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    os.replace(tmp, path)


def make_directories(path: str) -> list[str]:
    """Makes `path` and its missing parents; returns those it made, the deepest first (for
    `remove_empty_directories` when the step that needed them fails)."""
    made = []
    missing = os.path.abspath(path)
    while not os.path.exists(missing):
        made.append(missing)
        missing = os.path.dirname(missing)
    os.makedirs(path, exist_ok=True)
    return made


def remove_empty_directories(directories: list[str]) -> None:
    """Removes these directories, in order, up to the first that is not empty (or cannot be removed)."""
    for directory in directories:
        try:
            os.rmdir(directory)
        except OSError:
            return


def _probe(flag: str, path: str, directory: str, give: str = "file name") -> None:
    """Creates and removes a file in `directory`: the one sure test that the output can be written there
    (permission bits say nothing to root, nor about /proc, a read-only mount or a full quota)."""
    try:
        fd, name = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{os.getpid()}-probe-", dir=directory)
    except OSError as e:
        where = "" if os.path.abspath(directory) == os.path.abspath(path) else f" in {directory}"
        raise UserError(
            f"--{flag}={path} cannot be written ({e.strerror or e}{where}); give a writable {give}."
        ) from None
    os.close(fd)
    os.remove(name)


def check_input_file(flag: str, path: str) -> None:
    """Refuses an input file that is missing, a directory, unreadable or empty, before anything runs."""
    if not os.path.exists(path):
        raise UserError(f"--{flag}={path} does not exist; give a file.")
    if os.path.isdir(path):
        raise UserError(f"--{flag}={path} is a directory; give a file.")
    if not os.access(path, os.R_OK):
        raise UserError(f"--{flag}={path} is not readable.")
    if os.path.isfile(path) and os.path.getsize(path) == 0:
        raise UserError(f"--{flag}={path} is empty.")


def check_output_dir(flag: str, path: str) -> None:
    """Refuses an output directory that names a file, or that cannot be written (or made, where it is missing),
    before anything runs (it is made later, when needed)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"--{flag}={path} is a file, not a directory.")
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise UserError(f"--{flag}={path} cannot be written (Not a directory); give a writable directory.")
    _probe(flag, path, existing, "directory")


def check_output_file(flag: str, path: str) -> None:
    """Refuses an output file that names a directory, or whose directory is missing or not writable, before
    anything runs: the file is written last, and a bad name found then would waste the work."""
    if os.path.isdir(path):
        raise UserError(f"--{flag}={path} is a directory; give a file name.")
    if is_special_file(path):  # written in place (/dev/stdout, a FIFO): its directory (/dev) need not be writable
        if not os.access(path, os.W_OK):
            raise UserError(f"--{flag}={path} is not writable.")
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UserError(f"--{flag}={path}: its directory {directory} does not exist; create it first.")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UserError(f"--{flag}={path}: its directory {directory} is not writable.")
    _probe(flag, path, directory)


def replace_atomically(path: str, write: Callable[[str], None]) -> None:
    """Calls `write(tmp)` for a temporary name beside `path`, then renames it to `path`."""
    with atomic_output(path) as tmp:
        write(tmp)


def write_text(path: str, text: str) -> None:
    """Writes UTF-8 text atomically."""
    with atomic_output(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)


def write_json(path: str, value) -> None:
    """Writes `value` as indented, key-sorted JSON, atomically."""
    write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def read_json(path: str):
    """A JSON file this project wrote; one that was edited or damaged since is a UserError naming it."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(
            f"{path} is not valid JSON ({e}); it was changed after it was written: restore it, or start again "
            "in a new directory."
        ) from None


def remove_stale_temporaries(directory: str) -> list[str]:
    """Removes what interrupted writers (kill -9, power loss) left under `directory`; returns the paths.

    Only this module's temporary names (`.tmp-PID-NAME`) and staging directories
    (`.NAME.tmp-XXXX`) are touched. Call it only where no other process is
    writing into `directory` (a run's chief, at its start).
    """
    removed = []
    for root, dirs, names in os.walk(directory):
        for name in names:
            if name.startswith(TMP_PREFIX):
                path = os.path.join(root, name)
                with contextlib.suppress(OSError):
                    os.remove(path)
                    removed.append(path)
        for name in list(dirs):
            if name.startswith(TMP_PREFIX) or _STAGING.match(name):
                path = os.path.join(root, name)
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
                dirs.remove(name)
    return removed


def remove_abandoned_temporaries(directory: str, idle_seconds: float = 3600.0) -> list[str]:
    """Removes the temporary files (`.tmp-PID-NAME`) directly in `directory` that no one has written to for
    `idle_seconds`; returns their paths.

    For a directory that several processes, perhaps on several hosts, may be writing at once (the GCIDE
    cache), where `remove_stale_temporaries` would delete a live writer's file: a writer's temporary is
    modified as it is written, so one left untouched for an hour was left by a process that was killed.
    """
    removed = []
    deadline = time.time() - idle_seconds
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            with contextlib.suppress(OSError):
                if entry.name.startswith(TMP_PREFIX) and entry.is_file() and entry.stat().st_mtime < deadline:
                    os.remove(entry.path)
                    removed.append(entry.path)
    return removed
