"""Reading an ARPA file, the tables: each order's n-grams as sorted arrays while the file is read and closed
(`arpa_parse`, `arpa_close`), and what both need of them."""

from __future__ import annotations

import numpy as np

from nplm_tf.baselines import kneser_ney as kn
from pipelines import vocabulary as vocab_lib

MISSING_LOG10 = -100.0  # log10 P of a model word the file lacks (KenLM's for a file without <unk>)
PARSE_BASE = 1 << 24  # keys while reading: context * PARSE_BASE + word, room for words outside the vocabulary
LINES_PER_CHUNK = 1 << 16


class ArpaError(kn.NgramError):
    """The ARPA file cannot be read, or not as a model over the given vocabulary."""


class Table:
    """One order's n-grams while reading: sorted keys (context row * PARSE_BASE + word) and their fields."""

    FIELDS = ("context", "word", "suffix", "prob", "backoff", "line")

    def __init__(self, context, word, suffix, prob, backoff, line):
        self.context, self.word, self.suffix = context, word, suffix
        self.prob, self.backoff, self.line = prob, backoff, line
        self.keys = context.astype(np.int64) * PARSE_BASE + word

    def take(self, rows: np.ndarray) -> "Table":
        """The n-grams `rows` (indices or a mask), in that order."""
        return Table(*(getattr(self, name)[rows] for name in self.FIELDS))

    @classmethod
    def concat(cls, a: "Table", b: "Table") -> "Table":
        return cls(*(np.concatenate([getattr(a, name), getattr(b, name)]) for name in cls.FIELDS))

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        if self.keys.size == 0:
            return np.full(keys.shape, -1, np.int64)
        where = np.minimum(np.searchsorted(self.keys, keys), self.keys.size - 1)
        return np.where((self.keys[where] == keys) & (keys >= 0), where, -1)


def tokens_per_line(text: bytes) -> np.ndarray:
    """The number of fields (runs of bytes between ASCII whitespace, as `bytes.split` finds them) on each line
    of `text`, which ends with a newline."""
    a = np.frombuffer(text, np.uint8)
    sep = (a == 32) | ((a >= 9) & (a <= 13))
    start = np.empty(a.size, bool)
    start[0] = not sep[0]
    np.greater(sep[:-1], sep[1:], out=start[1:])
    ends = np.flatnonzero(a == 10)
    return np.add.reduceat(start, np.concatenate([[0], ends[:-1] + 1]), dtype=np.int32)


class TableReader:
    """What reading and closing share: the vocabulary's ids, the tables so far, refusals with a line number."""

    def __init__(self, path: str, vocab: vocab_lib.Vocabulary, unk_token: str):
        vocab_lib.check_unk_token(vocab, unk_token)
        self.path, self.vocab, self.unk_token = path, vocab, unk_token
        self.index = {w.encode("utf-8"): i for i, w in enumerate(vocab.words)}
        if unk_token != vocab_lib.UNK:
            del self.index[vocab_lib.UNK.encode()]
            self.index[unk_token.encode("utf-8")] = vocab.unk_id
        self.index[vocab_lib.BOS.encode()] = vocab.bos_id
        self.outside: list[str] = []  # words of the file outside the vocabulary, ids bos_id + 1 ...
        self.warnings: list[str] = []
        self.line = 0  # lines consumed
        self.pushed: list[bytes] = []  # lines read ahead and given back

    def fail(self, what: str, line: int | None = None) -> None:
        raise ArpaError(f"{self.path} line {line or self.line}: {what}")

    def _prefix_ids(self, words: np.ndarray, first: np.ndarray | None = None) -> np.ndarray:
        """Rows of the n-grams `words` (columns oldest first) in their order's table, -1 where one is unlisted;
        `first`, the suffix's first word (the columns then being the rest)."""
        if first is None:
            g, rest = words[:, 0], words[:, 1:]
        else:
            g, rest = first, words
        g = g.copy()
        for j in range(rest.shape[1]):
            g = self.tables[j + 2].lookup(np.where(g >= 0, g * PARSE_BASE + rest[:, j], -1))
        return g

    def _sorted(self, table: Table, order: np.ndarray | None = None) -> Table:
        """`table` sorted by key (`order`: its argsort, when the caller has it), refused where a key repeats."""
        sorted_table = table.take(np.argsort(table.keys, kind="stable") if order is None else order)
        self._check_unique(sorted_table.keys, sorted_table.line)
        return sorted_table

    def _check_unique(self, keys: np.ndarray, lines: np.ndarray) -> None:
        """Refuses the first n-gram listed twice (`keys` sorted, `lines` in their order)."""
        repeated = np.flatnonzero(keys[1:] == keys[:-1])
        if repeated.size:
            i = int(repeated[0])
            first, second = sorted(int(x) for x in lines[i : i + 2])
            self.fail(f"the n-gram of line {first} is listed again.", second)

    def _find(self, k: int, words: tuple) -> int:
        g = words[0]
        for j in range(2, k + 1):
            if g < 0:
                return -1
            g = int(self.tables[j].lookup(np.array([g * PARSE_BASE + words[j - 1]]))[0])
        return g

    def _replace(self, k: int, table: Table, keep: np.ndarray | None = None) -> np.ndarray:
        """Order k becomes `table` (rows `keep` of it), sorted; order k+1's contexts and suffixes follow.
        Returns each old row's new one (-1: dropped)."""
        if keep is not None:
            table = table.take(keep)
        order = np.argsort(table.keys, kind="stable")
        new_row = np.full(keep.size if keep is not None else order.size, -1, np.int64)
        kept = np.flatnonzero(keep) if keep is not None else np.arange(order.size)
        new_row[kept[order]] = np.arange(order.size)
        self.tables[k] = self._sorted(table, order)
        if k + 1 < len(self.tables):
            above = self.tables[k + 1]
            self.tables[k + 1] = Table(
                new_row[above.context], above.word, new_row[above.suffix], above.prob, above.backoff, above.line
            )
        return new_row
