"""Corpus readers: Brown straight from NLTK's brown.zip, or plain UTF-8 files.

A corpus is three splits (train, valid, test). A split is a sequence of *lines*;
a line is a unit that contexts never cross (a Brown text, or one line of a
file). Tokens are the line split on ASCII whitespace, the same rule as
`tf.strings.split`, so Python counting and the TensorFlow graph agree.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import sys
import zipfile
from collections.abc import Iterator

from pipelines.errors import UserError

SPLITS = ("train", "valid", "test")
BROWN_TRAIN_TOKENS = 800_000  # the Brown protocol (benchmarks/README.md): train while the running count is below this
BROWN_VALID_TOKENS = 1_000_000  # ... then valid while below this, else test

BYTE_ORDER_MARK = "\ufeff"
WHITESPACE = r"[ \t\n\v\f\r]"  # ASCII whitespace, what tf.strings.split splits on (a Python and RE2 class)
_WHITESPACE = re.compile(WHITESPACE + "+")
_BROWN_TEXT = re.compile(r"^brown/c[a-r]\d\d$")


class CorpusError(UserError):
    """The corpus cannot be read; the message says what was wrong and what to do."""


def tokenize(line: str) -> list[str]:
    """Splits on ASCII whitespace, exactly as `tf.strings.split(line)` does."""
    return [t for t in _WHITESPACE.split(line) if t]


@dataclasses.dataclass(frozen=True)
class Split:
    """One split: either in-memory lines (Brown) or UTF-8 files read lazily."""

    name: str
    lines: tuple[str, ...] | None = None  # whitespace-joined tokens, one per unit
    files: tuple[str, ...] | None = None

    def iter_lines(self) -> Iterator[str]:
        if self.lines is not None:
            yield from self.lines
            return
        for path in self.files or ():
            yield from _read_utf8_lines(path)

    def __len__(self) -> int:
        return len(self.lines) if self.lines is not None else len(self.files or ())


def unit_documents(split: Split) -> list[int] | None:
    """The document of each unit (non-blank line) of `split`, numbered from 0, or None where the text marks no
    documents: a blank line between lines, or a new file, starts one; Brown's lines are its texts, each a
    document. A cache of the text so far (`nplm_tf.baselines.cache`) reads it."""
    if split.lines is not None:
        return list(range(sum(1 for line in split.lines if tokenize(line))))
    documents, document, marked = [], -1, False
    for path in split.files or ():
        fresh = True  # a file starts a document
        for line in _read_utf8_lines(path):
            if not tokenize(line):
                fresh = True
                continue
            if fresh:
                marked = marked or document >= 0  # a second document: the text marks them
                document, fresh = document + 1, False
            documents.append(document)
    return documents if marked else None


@dataclasses.dataclass(frozen=True)
class Corpus:
    name: str
    splits: dict[str, Split]
    # How to read it again: the corpus flags that name it, paths absolute (a model directory keeps them as
    # corpus.json, which `evaluate`, `query` and the mixture fit read). The readers below set it; a corpus
    # made of lines by hand has none.
    spec: dict | None = None

    def __getitem__(self, split: str) -> Split:
        return self.splits[split]


# ---------------------------------------------------------------- Brown --


def nltk_data_paths() -> list[str]:
    """Where NLTK looks for data: $NLTK_DATA first, then NLTK's defaults."""
    paths = [p for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
    home = os.path.expanduser("~")
    paths += [os.path.join(home, "nltk_data")]

    paths += [os.path.join(sys.prefix, d) for d in ("nltk_data", "share/nltk_data", "lib/nltk_data")]
    paths += ["/usr/share/nltk_data", "/usr/local/share/nltk_data", "/usr/lib/nltk_data", "/usr/local/lib/nltk_data"]
    return paths


def find_brown_zip() -> str:
    for root in nltk_data_paths():
        path = os.path.join(root, "corpora", "brown.zip")
        if os.path.isfile(path):
            return path
    raise CorpusError(
        "Brown corpus not found (looked for corpora/brown.zip under $NLTK_DATA and NLTK's default "
        "paths); get it with `pip install nltk && python -m nltk.downloader brown` (NLTK is needed for that "
        "only) or set NLTK_DATA to the folder holding it."
    )


def read_brown_texts(path: str | None = None) -> list[tuple[str, list[str]]]:
    """The 500 Brown texts in sorted name order, as (name, tokens) per the Brown protocol (benchmarks/README.md)."""
    path = path or find_brown_zip()
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        raise CorpusError(f"cannot open {path} as a zip archive ({e}); download it again.") from None
    with archive:
        names = sorted(n for n in archive.namelist() if _BROWN_TEXT.match(n))
        if not names:
            raise CorpusError(f"{path} holds no Brown texts (brown/ca01 ... brown/cr09).")
        texts = []
        for name in names:
            raw = archive.read(name).decode("utf-8", errors="strict")
            # Each item is word/tag; the token is what precedes the last '/'.
            tokens = [item.rsplit("/", 1)[0] for item in tokenize(raw)]
            texts.append((name.split("/")[-1], tokens))
    return texts


def brown_corpus(path: str | None = None) -> Corpus:
    """Brown split into whole texts by running token count (with </s>); `path`: a brown.zip other than the one
    NLTK's folders hold (no flag names one, so such a corpus has no `spec`)."""
    parts: dict[str, list[str]] = {s: [] for s in SPLITS}
    running = 0
    for _, tokens in read_brown_texts(path):
        if running < BROWN_TRAIN_TOKENS:
            split = "train"
        elif running < BROWN_VALID_TOKENS:
            split = "valid"
        else:
            split = "test"
        parts[split].append(" ".join(tokens))
        running += len(tokens) + 1  # + </s>
    return Corpus("brown", {s: Split(s, lines=tuple(parts[s])) for s in SPLITS}, None if path else {"corpus": "brown"})


# ---------------------------------------------------------------- files --


def drop_byte_order_mark(line: str, number: int) -> str:
    """A file's first line without the U+FEFF byte-order mark some editors write; it is not text."""
    return line[1:] if number == 1 and line.startswith(BYTE_ORDER_MARK) else line


def _read_utf8_lines(path: str) -> Iterator[str]:
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                yield drop_byte_order_mark(raw.decode("utf-8"), number)
            except UnicodeDecodeError as e:
                raise CorpusError(
                    f"{path} line {number} is not valid UTF-8 (byte {e.start}); re-encode the file as UTF-8."
                ) from None


def split_patterns(value: str | None) -> list[str]:
    """A comma-separated flag value's paths or globs: spaces around a comma dropped, a leading `~` expanded."""
    return [os.path.expanduser(part.strip()) for part in (value or "").split(",") if part.strip()]


def expand_files(pattern: str, flag: str) -> tuple[str, ...]:
    """Comma-separated globs (`split_patterns`) to a sorted list of files, or a clear error.

    A file matched twice (`'data/*.txt,data/a.txt'`) is read once, where it is first matched.
    """
    parts = split_patterns(pattern)
    if not parts:
        raise CorpusError(f"--{flag} is empty; give a file or glob of UTF-8 text files.")
    paths: dict[str, str] = {}  # real path -> the path as matched
    for part in parts:
        matches = [p for p in (sorted(glob.glob(part)) if glob.has_magic(part) else [part]) if os.path.isfile(p)]
        if not matches:
            if os.path.isdir(part):
                raise CorpusError(
                    f"--{flag}: {part!r} is a directory; give its files, e.g. {os.path.join(part, '*')!r}."
                )
            raise CorpusError(f"--{flag}: no file matches {part!r}.")
        for p in matches:
            paths.setdefault(os.path.realpath(p), p)
    return tuple(paths.values())


def files_corpus(train: str, valid: str, test: str) -> Corpus:
    """Each split from comma-separated globs, as `--train_files`, `--valid_files` and `--test_files` take them."""
    specs = {"train": train, "valid": valid, "test": test}
    splits = {s: Split(s, files=expand_files(p, f"{s}_files")) for s, p in specs.items()}
    return Corpus("files", splits, {"corpus": "files", **{f"{s}_files": absolute(p) for s, p in specs.items()}})


def absolute(patterns: str) -> str:
    """Comma-separated paths or globs made absolute, so that they name the same files from any directory."""
    return ",".join(os.path.abspath(p) for p in split_patterns(patterns))


def files_shared_with_train(corpus: Corpus) -> dict[str, list[str]]:
    """For valid and test, the files that train also reads: their perplexity is then measured on training text."""
    if corpus["train"].files is None:
        return {}
    train = {os.path.realpath(p) for p in corpus["train"].files}
    shared = {s: [p for p in corpus[s].files or () if os.path.realpath(p) in train] for s in ("valid", "test")}
    return {s: paths for s, paths in shared.items() if paths}


def file_split(pattern: str, flag: str = "files", name: str = "files") -> Split:
    return Split(name, files=expand_files(pattern, flag))


def check_split(split: Split, order: int) -> None:
    """Fails clearly on an empty split, or one where no line reaches n tokens.

    Every file is checked on its own, so the message can name it.
    """
    groups = [(f, Split(split.name, files=(f,))) for f in split.files] if split.files else [(split.name, split)]
    for name, part in groups:
        longest = 0
        for line in part.iter_lines():
            longest = max(longest, len(tokenize(line)))
            if longest >= order:
                break
        if longest == 0:
            raise CorpusError(f"{name} is empty (no tokens); give a file with text in it.")
        if longest < order:
            raise CorpusError(
                f"{name} has no line of at least {order} tokens (the longest has {longest}); "
                f"lower --order or put whole texts on each line."
            )
