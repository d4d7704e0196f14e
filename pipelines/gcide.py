"""GCIDE, the GNU Collaborative International Dictionary of English, as a large-vocabulary corpus.

Debian ships it in dictd's format (`apt-get download dict-gcide && dpkg -x
dict-gcide_*.deb DIR`, or installed: /usr/share/dictd/gcide.dict.dz): a
dictzip (gzip-readable) file of entries separated by a blank line, each
starting at column 0 with its headword line, the rest indented:

    Dog \\Dog\\ (d[add]g or d[o^]g), n. [AS. docga; akin to D. dog
       mastiff.]
       1. (Zool.) A quadruped of the genus {Canis}, esp. the
          domestic dog ({Canis familiaris}).
          [1913 Webster +PJC]

Each entry becomes one line of running text: definitions and quotations are
kept; the headword line (headwords, pronunciations, part of speech, the
etymology bracket), source tags and labels (`[1913 Webster]`, `[Obs.]`),
quotation attributions (`--Shak.`), sense numbers, subject labels
(`(Zool.)`) and markup (`{...}`, `\\...\\`, character entities such as
`['e]`) are removed. Tokens are words (letters and digits, with inner
apostrophes) and single punctuation marks, case kept. Entries are split by
their position among the kept entries: of every 20, the 19th goes to valid,
the 20th to test, the rest to train.

The text is made once per source file and cached as three UTF-8 files
(`train.txt`, `valid.txt`, `test.txt`), which the window pipeline streams.
Processes that find the cache incomplete all convert, each writing under its
own temporary names; the temporaries a killed conversion leaves behind are
removed by the next process to use the cache once they are an hour old.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import zlib

from pipelines import files
from pipelines.corpus import SPLITS, Corpus, CorpusError, Split

DEFAULT_PATH = "/usr/share/dictd/gcide.dict.dz"
DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "nplm_tf", "gcide")
VERSION = 1  # of the text rules below; a change makes a new cache
SPLIT_EVERY = 20  # of each 20 entries: position 18 -> valid, 19 -> test, the rest -> train

_ENTRY_BREAK = re.compile(rb"\n\n(?=\S)")
_HEADWORD = re.compile(r"[^\s\\][^\n\\]*\\[^\\\n]+\\")  # a headword line: `Dog \\Dog\\ ...`
# Character entities inside words: ['e], [=a], [ae], [imac] ... (no space, touching a letter).
_ENTITY = re.compile(r"(?<=[A-Za-z])\[([^\[\]\s]{1,6})\]|\[([^\[\]\s]{1,6})\](?=[A-Za-z])")
_NAMED = {"imac": "i", "aum": "a", "asl": "a", "add": "a", "eth": "th", "thorn": "th", "root": "", "deg": ""}
_BRACKET = re.compile(r"\[[^\[\]]*\]")
_PRONUNCIATION = re.compile(r"\\[^\\\n]*\\|\([^()\n]*[*`][^()\n]*\)")  # \\Dog\\, (d*g`ree)
_BRACES = re.compile(r"[{}]")
_TAGS = re.compile(r"<[^<>\n]*>")
_ATTRIBUTION = re.compile(r"--\s?(?=[A-Z0-9])[^\n]*")
_SENSE = re.compile(r"^\s*(?:\d+\.|\([a-z]\)|\(\d+\))\s+", re.M)
_LABEL = re.compile(r"\((?:[A-Z][A-Za-z]*\.?\s?)+\)|^\s*(?:Note|Syn|Usage)\s*:", re.M)
_TOKEN = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*|[^\w\s]")


def _entity(match: re.Match) -> str:
    inner = match.group(1) or match.group(2)
    letters = re.sub(r"[^A-Za-z]", "", inner)
    return _NAMED.get(letters, letters)


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:  # a few entries hold Windows-1252 bytes (0x92 for an apostrophe)
        return raw.decode("cp1252", errors="replace")


def _header_end(entry: str) -> int:
    """Where the headword line ends: its first line, or later if an etymology bracket opened on it runs on."""
    depth = 0
    for i, char in enumerate(entry):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(depth - 1, 0)
        elif char == "\n" and depth == 0:
            return i
    return len(entry)


def entry_text(entry: str) -> str:
    """One dictionary entry as one line of space-separated tokens ('' for what is not a dictionary entry)."""
    if not _HEADWORD.match(entry):  # the files' front matter and licence notices
        return ""
    entry = _ENTITY.sub(_entity, entry)
    body = entry[_header_end(entry) :]
    body = "\n".join(line for line in body.split("\n") if len(line) - len(line.lstrip(" ")) < 40)
    while True:  # etymologies may hold brackets of their own
        stripped = _BRACKET.sub(" ", body)
        if stripped == body:
            break
        body = stripped
    for pattern in (_PRONUNCIATION, _TAGS, _ATTRIBUTION, _SENSE, _LABEL):
        body = pattern.sub(" ", body)
    body = _BRACES.sub("", body)
    return " ".join(_TOKEN.findall(body))


def read_entries(path: str) -> list[str]:
    """The entries of a dictd `.dict.dz` (or plain `.dict`) file, without dictd's own `00-database-*` entries."""
    if os.path.isdir(path):
        candidates = (os.path.join(path, "usr", "share", "dictd", "gcide.dict.dz"), os.path.join(path, "gcide.dict.dz"))
        inside = [candidate for candidate in candidates if os.path.isfile(candidate)]
        if inside:
            raise CorpusError(
                f"--gcide_path={path} is a directory; give the dictionary file in it: --gcide_path={inside[0]}."
            )
        raise CorpusError(
            f"--gcide_path={path} is a directory with no gcide.dict.dz in it; give the file (`dpkg -x "
            "dict-gcide_*.deb DIR` puts it at DIR/usr/share/dictd/gcide.dict.dz)."
        )
    if not os.path.isfile(path):
        raise CorpusError(
            f"GCIDE not found at {path}; get it with `apt-get download dict-gcide && dpkg -x dict-gcide_*.deb DIR` "
            "and pass --gcide_path=DIR/usr/share/dictd/gcide.dict.dz (or `apt-get install dict-gcide`)."
        )
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
        opener = gzip.open if magic == b"\x1f\x8b" else open
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError, zlib.error) as e:
        raise CorpusError(f"{path} is not a readable dictd file ({e}); download dict-gcide again.") from None
    entries = [e for e in _ENTRY_BREAK.split(raw.strip(b"\n")) if e.strip()]
    if not any(e.startswith(b"00-database") or e.startswith(b"00database") for e in entries[:20]):
        raise CorpusError(f"{path} is not a dictd dictionary file (it has no 00-database entries).")
    return [_decode(e) for e in entries if not (e.startswith(b"00-database") or e.startswith(b"00database"))]


def split_of(position: int) -> str:
    slot = position % SPLIT_EVERY
    return "valid" if slot == SPLIT_EVERY - 2 else "test" if slot == SPLIT_EVERY - 1 else "train"


def convert(path: str) -> dict[str, list[str]]:
    """The entries of `path` as lines of text, dealt into the three splits."""
    lines: dict[str, list[str]] = {name: [] for name in SPLITS}
    position = 0
    for entry in read_entries(path):
        text = entry_text(entry)
        if text:
            lines[split_of(position)].append(text)
            position += 1
    if not lines["train"]:
        raise CorpusError(f"{path} holds no dictionary text.")
    return lines


def cache_dir(path: str, cache_root: str) -> str:
    """A directory named by the source file's identity and the text rules' version."""
    stat = os.stat(path)
    key = hashlib.sha1(f"{os.path.abspath(path)}:{stat.st_size}:{stat.st_mtime_ns}:{VERSION}".encode()).hexdigest()
    return os.path.join(cache_root, key[:16])


def gcide_corpus(path: str = DEFAULT_PATH, cache_root: str = DEFAULT_CACHE) -> Corpus:
    """GCIDE as train/valid/test text files (converted once, then read from the cache)."""
    if not os.path.isfile(path):
        read_entries(path)  # raises the error that says how to get it
    directory = cache_dir(path, cache_root)
    paths = {name: os.path.join(directory, f"{name}.txt") for name in SPLITS}
    files.remove_abandoned_temporaries(directory)  # what a conversion killed mid-write left
    if not all(os.path.isfile(p) for p in paths.values()):
        try:  # before the conversion, which takes a minute
            made = files.make_directories(directory)
        except OSError as e:
            raise CorpusError(
                f"--gcide_cache={cache_root} cannot hold the converted text ({e.strerror}); give a writable directory."
            ) from None
        try:
            lines = convert(path)
            for name in SPLITS:
                files.write_text(paths[name], "".join(line + "\n" for line in lines[name]))
        except BaseException:  # a file that is not GCIDE, or an interrupt: no empty cache directory is left
            files.remove_empty_directories(made)
            raise
    spec = {"corpus": "gcide", "gcide_path": os.path.abspath(path), "gcide_cache": os.path.abspath(cache_root)}
    return Corpus("gcide", {name: Split(name, files=(paths[name],)) for name in SPLITS}, spec)
