"""The arrays an n-gram model is made of: a split as flat ids, and the n-grams of one order.

n-grams of order k are numbered by `np.unique` of (id of the (k-1)-gram context) * B + word, so a model is
a trie spread over sorted arrays (`Order`), and modified Kneser-Ney's discounts come from counts of counts.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from nplm_tf.core import config as config_lib
from pipelines.errors import UserError

FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)  # lmplz --discount_fallback


@dataclasses.dataclass
class TokenArrays:
    """A split as flat ids: each line is `<s>` + words + `</s>`."""

    tokens: np.ndarray  # (T,) int64 ids; bos_id at each line start
    offset: np.ndarray  # (T,) position within its line (0 at the <s>)

    @classmethod
    def from_lines(cls, lines_of_ids: list[list[int]], bos_id: int, eos_id: int) -> "TokenArrays":
        lengths = np.array([len(ids) + 2 for ids in lines_of_ids], np.int64)
        tokens = np.empty(int(lengths.sum()), np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        flat = [t for ids in lines_of_ids for t in (bos_id, *ids, eos_id)]
        tokens[:] = flat
        offset = np.arange(tokens.size, dtype=np.int64) - np.repeat(starts, lengths)
        return cls(tokens, offset)

    @property
    def predicted(self) -> np.ndarray:
        """Mask of the positions that are predicted (everything but <s>)."""
        return self.offset > 0


@dataclasses.dataclass
class Order:
    """The n-grams of one order k, sorted by key = context id * B + word."""

    keys: np.ndarray  # (G,) int64, sorted
    context: np.ndarray  # (G,) id of the (k-1)-gram prefix (0 for unigrams)
    word: np.ndarray  # (G,) last word
    suffix: np.ndarray  # (G,) id of the (k-1)-gram suffix (-1 for unigrams)
    count: np.ndarray  # (G,) adjusted counts a(g)
    discounts: tuple[float, float, float]
    raw: np.ndarray | None = None  # (G,) raw counts (occurrences in train)
    prob: np.ndarray | None = None  # (G,) interpolated p(word | context)
    backoff: np.ndarray | None = None  # (G,) γ of this n-gram as a context (1 if never one)
    pruned: np.ndarray | None = None  # (G,) as a context: the summed counts a(·) of its pruned successors

    def discount(self, counts: np.ndarray) -> np.ndarray:
        d = np.zeros(counts.shape, np.float64)
        d[counts == 1], d[counts == 2], d[counts >= 3] = self.discounts
        return d

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """Ids of `keys` in this order, -1 where absent."""
        where = np.searchsorted(self.keys, keys)
        where = np.minimum(where, self.keys.size - 1)
        found = (self.keys[where] == keys) & (keys >= 0)
        return np.where(found, where, -1)


def discounts_from(counts: np.ndarray, order: int) -> tuple[tuple[float, float, float], str | None]:
    """Modified KN discounts from counts of counts, or the fallback with the reason."""
    t = [int(np.count_nonzero(counts == c)) for c in (1, 2, 3, 4)]
    if min(t) > 0:
        y = t[0] / (t[0] + 2 * t[1])
        d = (1 - 2 * y * t[1] / t[0], 2 - 3 * y * t[2] / t[1], 3 - 4 * y * t[3] / t[2])
        if all(0 < x <= c + 1 for c, x in enumerate(d)):
            return d, None
    return FALLBACK_DISCOUNTS, (
        f"order {order}: counts of counts t1..t4 = {t} do not give valid discounts; "
        f"using the fallback {FALLBACK_DISCOUNTS} (like lmplz --discount_fallback)"
    )


class NgramError(UserError):
    """The n-gram model cannot be built or used as asked."""


def prune_thresholds(values, order: int, name: str = "prune") -> tuple[int, ...]:
    """`config.prune_thresholds`, refused as an `NgramError`: `ngram --prune`'s and `KneserNey.prune`'s."""
    return config_lib.prune_thresholds(values, order, name, NgramError)


def index_array(ids: np.ndarray) -> np.ndarray:
    """An n-gram's context, word or suffix ids as int32 when they fit (12 of the 64 bytes an n-gram holds, in
    memory and in `ngram.npz`), else int64. They index arrays and are never multiplied: keys stay int64."""
    fits = ids.size == 0 or (int(ids.min()) >= -1 and int(ids.max()) <= np.iinfo(np.int32).max)
    return ids.astype(np.int32, copy=False) if fits else ids
