"""The NumPy engine (`nplm_tf.engines`): float32 logits in, probabilities summed in float64."""

from __future__ import annotations

import threading

import numpy as np

# A block of exp values is only summed, so one buffer per thread is reused for it: fresh memory of a block's
# size costs a page fault per page on first touch, as much as the exp itself (`benchmarks.language_model`).
_SCRATCH = threading.local()
_SCRATCH_LIMIT = 1 << 23  # bytes kept per thread; larger blocks get memory of their own


def _scratch(shape: tuple[int, int]) -> np.ndarray:
    size = shape[0] * shape[1]
    if size * 4 > _SCRATCH_LIMIT:
        return np.empty(shape, np.float32)
    buffer = getattr(_SCRATCH, "buffer", None)
    if buffer is None or buffer.size < size:
        buffer = _SCRATCH.buffer = np.empty(size, np.float32)
    return buffer[:size].reshape(shape)


def shifted_exp(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(exp(y − max y) per row in float32, computed in place on a copy; max y (rows, 1)). float32's exp is
    several times as fast as float64's over a (rows, |V|) block; each term's relative error (~1e-7) stays
    that small in the float64 sums taken of them."""
    top = logits.max(axis=1, keepdims=True)
    e = np.subtract(logits, top, dtype=np.float32)
    np.exp(e, out=e)
    return e, top


def log_normalizer(logits: np.ndarray) -> np.ndarray:
    """ln Σ_w exp(y_w) per row, float64, from float32 logits (rows, |V|), for a decoder's cache. exp(y) is
    summed unshifted where float32 holds it (no row's max to find and subtract: a pass less over the block),
    in float32 by NumPy's pairwise summation (relative error near float32's own epsilon, as the logits carry;
    `log_softmax_at`, which exact perplexities use, sums in float64); a row whose sum overflows or comes near
    float32's smallest numbers is summed again shifted by its max."""
    with np.errstate(over="ignore", under="ignore"):
        e = np.exp(logits, out=_scratch(logits.shape))
        sums = e.sum(axis=1).astype(np.float64)
    unsafe = ~((sums < 1e37) & (sums > 1e-30))  # NaN too: a NaN logit gives a NaN normalizer either way
    with np.errstate(divide="ignore"):
        ln_z = np.log(sums)
    if unsafe.any():
        rows = logits[unsafe]
        shifted, top = shifted_exp(rows)
        ln_z[unsafe] = np.log(shifted.sum(axis=1, dtype=np.float64)) + top[:, 0]
    return ln_z


class Numpy:
    name = "numpy"

    # ------------------------------------------------------------------ softmax --

    @staticmethod
    def log_softmax_at(logits, columns):
        """ln softmax(logits)[row, column] per row, float64, from float32 logits (rows, outputs)."""
        if len(logits) == 0:
            return np.zeros(0)
        e, top = shifted_exp(logits)
        ln_z = np.log(e.sum(axis=1, dtype=np.float64))
        rows = np.arange(len(columns))
        return (logits[rows, columns].astype(np.float64) - top[:, 0].astype(np.float64)) - ln_z

    @staticmethod
    def log_normalizer(logits):
        """ln Z = ln Σ_w exp(y_w) per row, float64 (`log_normalizer`)."""
        return log_normalizer(logits)

    @staticmethod
    def softmax(logits):
        """softmax over each row, float64 (each row sums to 1 in float64)."""
        e, _ = shifted_exp(logits)
        e = e.astype(np.float64)
        e /= e.sum(axis=1, keepdims=True)
        return e

    @staticmethod
    def logsumexp(x):
        """ln Σ exp over each row, (rows, 1), in x's float type (shifted by the row's max)."""
        top = np.max(x, axis=1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0).astype(x.dtype)
        with np.errstate(divide="ignore"):
            return np.log(np.sum(np.exp(x - top), axis=1, keepdims=True)) + top

    @classmethod
    def log_softmax(cls, x):
        return x - cls.logsumexp(x)

    # ---------------------------------------------------------------- ranking --

    @staticmethod
    def top_k(x, k):
        """The k largest entries of each row, largest first, ties to the lower index: (values (rows, k), indices
        (rows, k) int64). A small k takes each row's entries at least as large as its k-th (`np.partition`,
        ties at the k-th included) and sorts only those; a large one sorts the rows (stably)."""
        k, (rows, n) = int(k), x.shape
        if 0 < k and 8 * k < n:
            neg = -x
            kth = np.partition(neg, k - 1, axis=1)[:, k - 1 : k]
            row, column = np.nonzero(neg <= kth)  # row by row, each row's columns ascending
            counts = np.bincount(row, minlength=rows)
            if counts.min(initial=k) >= k:  # (not where NaN stands among the k best: sorted below)
                ranked = column[np.lexsort((column, neg[row, column], row))]
                order = ranked[(np.cumsum(counts) - counts)[:, None] + np.arange(k)]
                return np.take_along_axis(x, order, axis=1), order.astype(np.int64)
        order = np.argsort(-x, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(x, order, axis=1), order.astype(np.int64)

    @staticmethod
    def row_min(x):
        """Each row's smallest entry, (rows, 1); +inf for a row of none."""
        return np.min(x, axis=1, keepdims=True, initial=np.inf)

    @staticmethod
    def argsort(x):
        """Each row's ascending order, stable, (rows, columns) int64."""
        return np.argsort(x, axis=1, kind="stable")

    @staticmethod
    def searchsorted(sorted_values, values, side="left", like=None):
        """Where each value would go in a sorted vector, in `like`'s integer type (int64 without it)."""
        where = np.searchsorted(sorted_values, values, side=side)
        return where.astype(like.dtype if like is not None else np.int64)

    # ----------------------------------------------------------------- random --

    @staticmethod
    def fold_in(seed, data: int):
        """A seed pair of its own for each `data` under `seed` (two int64)."""
        words = [int(s) % 2**64 for s in np.asarray(seed).ravel()] + [int(data)]
        return np.random.SeedSequence(words).generate_state(2, np.uint64).view(np.int64)

    @classmethod
    def derived_seed(cls, seed: int, n: int) -> int:
        """`seed` itself for n = 0, else a 64-bit seed drawn from (seed, n) (`fold_in`'s first word): the seed of a
        run's n-th group of draws, so that no two groups (of this seed or another) repeat each other's."""
        return seed if n == 0 else int(cls.fold_in([seed], n)[0])

    @staticmethod
    def uniform(seed, rows):
        """`rows` uniform float64 draws in [0, 1) of a seed pair (NumPy's Philox: not TensorFlow's stream)."""
        words = [int(s) % 2**64 for s in np.asarray(seed).ravel()]
        return np.random.Generator(np.random.Philox(np.random.SeedSequence(words))).random(int(rows))

    @classmethod
    def categorical(cls, log_probs, seed):
        """One column per row drawn in proportion to exp(log_probs) (unnormalized), (rows,) int64, by the
        inverse CDF: a column of probability 0 is never drawn."""
        p = np.exp(log_probs - np.max(log_probs, axis=1, keepdims=True))
        cdf = np.cumsum(p, axis=1)
        target = cls.uniform(seed, len(p)) * cdf[:, -1]
        return np.minimum(np.sum(cdf <= target[:, None], axis=1), p.shape[1] - 1).astype(np.int64)

    # ---------------------------------------------------------------- elementwise --

    log, log1p, exp, tanh, minimum, maximum, where, clip = (
        staticmethod(f) for f in (np.log, np.log1p, np.exp, np.tanh, np.minimum, np.maximum, np.where, np.clip)
    )
    matmul, ones_like, floormod, reshape, repeat, tile = (
        staticmethod(f) for f in (np.matmul, np.ones_like, np.mod, np.reshape, np.repeat, np.tile)
    )

    @staticmethod
    def softplus(x):
        return np.logaddexp(0.0, x)

    @staticmethod
    def sigmoid(x):
        return 1.0 / (1.0 + np.exp(-x))

    @staticmethod
    def to64(x):
        return np.asarray(x, np.float64)

    @staticmethod
    def int64(x):
        return np.asarray(x, np.int64)

    @staticmethod
    def cast(x, dtype):
        """x in `dtype` (a NumPy type, or its name)."""
        return np.asarray(x).astype(dtype)

    @staticmethod
    def as_bool(x):
        return np.asarray(x, bool)

    @staticmethod
    def as_int(mask):
        """A boolean array as 0/1 integers."""
        return np.asarray(mask).astype(np.int64)

    # ---------------------------------------------------------------------- shape --

    @staticmethod
    def arange(n, like=None):
        """0..n-1, in `like`'s integer type (int64 without it)."""
        return np.arange(int(n), dtype=like.dtype if like is not None else np.int64)

    @staticmethod
    def fill(shape, value, dtype):
        return np.full([int(d) for d in shape], value, np.dtype(dtype))

    @staticmethod
    def rows(x) -> int:
        return len(x)

    @staticmethod
    def shape(x):
        return np.shape(x)

    @staticmethod
    def stack(arrays, axis=1):
        return np.stack(arrays, axis=axis)

    @staticmethod
    def concat(arrays, axis=1):
        return np.concatenate(arrays, axis=axis)

    @staticmethod
    def pad_columns(x, count, value):
        """x with `count` columns of `value` after its own."""
        return np.pad(x, [(0, 0), (0, count)], constant_values=value)

    # -------------------------------------------------------------------- indices --

    @staticmethod
    def cumsum(x, axis=None):
        return np.cumsum(x, axis=axis)

    @staticmethod
    def cumprod_after(x):
        """Π_{j>i} x[:, j] for each column i (1 for the last), along rows."""
        out = np.ones_like(x)
        out[:, :-1] = np.cumprod(x[:, :0:-1], axis=1)[:, ::-1]
        return out

    @staticmethod
    def sum(x, axis=None):
        return np.sum(x, axis=axis)

    @staticmethod
    def read(table):
        """A table as an array to index (NumPy's are arrays already)."""
        return table

    @staticmethod
    def size(x):
        return np.size(x)

    @staticmethod
    def gather(table, rows):
        """table[rows]: the rows of `table` (an array, a list) at each index of `rows`."""
        return np.asarray(table)[rows]

    @staticmethod
    def take_along_rows(x, columns):
        """x[i, columns[i, j]] for each row i, (rows, k)."""
        return np.take_along_axis(x, columns, axis=1)

    @staticmethod
    def nonzero(mask):
        """The indices where a 1-D mask holds, int64."""
        return np.flatnonzero(mask)

    @staticmethod
    def add_at(base, rows, values):
        """A copy of `base` with `values` added at `rows` (distinct indices)."""
        out = np.array(base)
        out[rows] += values
        return out

    @staticmethod
    def ragged_range(lo, hi):
        """The ranges lo[i]..hi[i]-1 laid end to end: (the row i of each entry, the entry), both int64."""
        counts = np.asarray(hi - lo, np.int64)
        rows = np.repeat(np.arange(len(counts)), counts)
        return rows, np.arange(counts.sum()) + np.repeat(lo - (np.cumsum(counts) - counts), counts)

    @staticmethod
    def scatter_2d(base, rows, columns, values):
        """A copy of `base` with values at (rows[i], columns[i]) (distinct)."""
        out = np.array(base)
        out[rows, columns] = values
        return out

    @staticmethod
    def scatter_rows(base, rows, values):
        """A copy of `base` with its rows `rows` (distinct) replaced by `values`."""
        out = np.array(base)
        out[rows] = values
        return out

    @staticmethod
    def scatter_into(size, fill, at, values):
        """A vector of `size` `fill`s (int64) with `values` at the indices `at` (distinct)."""
        out = np.full(int(size), fill, np.int64)
        out[at] = values
        return out

    @staticmethod
    def sliding_window(x, width: int):
        """Every `width` consecutive entries of a vector, (len(x) - width + 1, width) (none when shorter)."""
        if len(x) < width:
            return np.zeros((0, width), np.asarray(x).dtype)
        return np.lib.stride_tricks.sliding_window_view(x, width)


NUMPY = Numpy()
