"""pipelines.files: a write that fails or is interrupted never damages the previous file."""

import multiprocessing
import os
import time

import numpy as np
import pytest

from pipelines import files


def listing(directory):
    return sorted(os.listdir(directory))


def test_write_text_replaces_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "table.md"
    files.write_text(str(path), "old\n")
    files.write_text(str(path), "new ü\n")
    assert path.read_text(encoding="utf-8") == "new ü\n"
    assert listing(tmp_path) == ["table.md"]


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path, error):
    path = tmp_path / "vocab.tsv"
    path.write_text("complete\n", encoding="utf-8")

    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("half")
        raise error

    with pytest.raises(type(error)):
        files.replace_atomically(str(path), write)
    assert path.read_text(encoding="utf-8") == "complete\n"
    assert listing(tmp_path) == ["vocab.tsv"]


def test_a_failure_before_anything_is_written_is_passed_on(tmp_path):
    path = tmp_path / "x.json"
    with pytest.raises(ValueError):
        with files.atomic_output(str(path)):
            raise ValueError("no")
    assert listing(tmp_path) == []


def test_the_temporary_name_keeps_the_suffix_writers_check(tmp_path):
    # np.savez appends ".npz" to a name without it; the rename must still find the file.
    path = tmp_path / "ngram.npz"
    files.replace_atomically(str(path), lambda tmp: np.savez(tmp, a=np.arange(3)))
    assert listing(tmp_path) == ["ngram.npz"]
    with np.load(path) as f:
        np.testing.assert_array_equal(f["a"], [0, 1, 2])
    assert files.temporary_name(str(tmp_path / "best.weights.h5")).endswith(".weights.h5")
    assert os.path.dirname(files.temporary_name(str(path))) == str(tmp_path)


def _write_slowly(path, text, barrier, results):
    try:
        barrier.wait()
        with files.atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            for line in text.splitlines(keepends=True):
                f.write(line)
                f.flush()
                time.sleep(0.01)  # the other process opens and writes meanwhile
        results.put("ok")
    except BaseException as e:
        results.put(repr(e))


def test_two_processes_writing_one_path_each_leave_a_whole_file(tmp_path):
    # Workers of a multi-worker run on one host convert GCIDE into one cache at once. With one temporary name
    # for both, the second open truncated the first's file, and one process read an empty split or failed
    # to rename a temporary the other had already renamed.
    context = multiprocessing.get_context("spawn")  # not fork: this process may hold TensorFlow's threads
    barrier, results = context.Barrier(2), context.Queue()
    path = str(tmp_path / "train.txt")
    texts = ["".join(f"{who} line {i}\n" for i in range(20)) for who in ("first", "second")]
    writers = [context.Process(target=_write_slowly, args=(path, text, barrier, results)) for text in texts]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=60)
    assert sorted(results.get(timeout=5) for _ in writers) == ["ok", "ok"]
    assert open(path, encoding="utf-8").read() in texts
    assert listing(tmp_path) == ["train.txt"]


def test_stale_temporaries_are_removed_and_nothing_else(tmp_path):
    from pipelines.files import remove_stale_temporaries

    (tmp_path / "backup").mkdir()
    (tmp_path / "export" / "1").mkdir(parents=True)
    (tmp_path / "export" / ".2.tmp-abc123" / "variables").mkdir(parents=True)
    stale = [tmp_path / ".tmp-metrics.json", tmp_path / "backup" / ".tmp-epoch-0003.weights.h5"]
    kept = [
        tmp_path / "metrics.json",
        tmp_path / "backup" / "epoch-0002.weights.h5",
        tmp_path / "export" / "1" / "x",
        tmp_path / "notes.tmp-draft",
        tmp_path / ".hidden",
    ]
    for path in stale + kept:
        path.write_text("x")
    removed = remove_stale_temporaries(str(tmp_path))
    assert sorted(removed) == sorted([str(p) for p in stale] + [str(tmp_path / "export" / ".2.tmp-abc123")])
    assert all(p.exists() for p in kept) and not any(p.exists() for p in stale)
    assert not (tmp_path / "export" / ".2.tmp-abc123").exists()


@pytest.mark.parametrize("data", [b'{"generations": [', b"\xff\xfe{}"])
def test_a_damaged_json_file_is_a_user_error_naming_it(tmp_path, data):
    """A run's state.json, history.json or corpus.json edited since it was written: once a JSONDecodeError or
    UnicodeDecodeError traceback, now one sentence through every binary."""
    path = tmp_path / "state.json"
    path.write_bytes(data)
    with pytest.raises(files.UserError, match=f"^{path} is not valid JSON .*restore it, or start again"):
        files.read_json(str(path))
    files.write_json(str(path), {"a": 1})
    assert files.read_json(str(path)) == {"a": 1}


def test_directories_made_for_a_failed_step_are_removed_up_to_one_that_holds_files(tmp_path):
    (tmp_path / "kept").mkdir()
    made = files.make_directories(str(tmp_path / "kept" / "a" / "b" / "c"))
    assert made == [str(tmp_path / "kept" / "a" / "b" / "c"), str(tmp_path / "kept" / "a" / "b")] + [
        str(tmp_path / "kept" / "a")
    ]
    (tmp_path / "kept" / "a" / "note.txt").write_text("someone else's\n")
    files.remove_empty_directories(made)
    assert not (tmp_path / "kept" / "a" / "b").exists()
    assert (tmp_path / "kept" / "a" / "note.txt").read_text() == "someone else's\n"
    assert files.make_directories(str(tmp_path / "kept")) == []


def _read_fifo_in_background(fifo):
    """A reader of `fifo` (`cat`, so that a writer never blocks on it) and the file it copies into."""
    import subprocess

    out = fifo.parent / "read.txt"
    return subprocess.Popen(["sh", "-c", f"cat '{fifo}' > '{out}'"]), out


def test_a_special_file_is_written_in_place_not_replaced(tmp_path):
    """`--per_token=/dev/stdout` or a FIFO: renaming a temporary file over it replaced the device or pipe with a
    regular file (as root, /dev/stdout and /dev/full themselves)."""
    import stat

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert files.is_special_file(str(fifo)) and not files.is_special_file(str(tmp_path))
    files.check_output_file("per_token", str(fifo))
    reader, out = _read_fifo_in_background(fifo)
    try:
        files.write_text(str(fifo), "tokens\n")
        reader.wait(timeout=30)
    finally:
        reader.kill()
    assert out.read_text() == "tokens\n" and stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert listing(tmp_path) == ["pipe", "read.txt"]  # no temporary beside it
