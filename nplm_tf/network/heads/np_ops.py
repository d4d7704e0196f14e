"""The NumPy operations the heads share over float32 logits: a softmax and one column of a log-softmax (their
sums in float64), and the log-normalizer a decoder's cache keeps."""

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


def log_softmax_at(logits: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """ln softmax(logits)[row, column] per row, float64, from float32 logits."""
    e, top = shifted_exp(logits)
    ln_z = np.log(e.sum(axis=1, dtype=np.float64))
    rows = np.arange(len(columns))
    return (logits[rows, columns].astype(np.float64) - top[:, 0].astype(np.float64)) - ln_z


def softmax(logits: np.ndarray) -> np.ndarray:
    """softmax over each row, float64 (each row sums to 1 in float64), from float32 logits."""
    e, _ = shifted_exp(logits)
    e = e.astype(np.float64)
    e /= e.sum(axis=1, keepdims=True)
    return e
