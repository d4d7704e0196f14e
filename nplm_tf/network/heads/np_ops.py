"""The NumPy operations the heads share: a softmax and one column of a log-softmax over float32 logits, their
sums in float64."""

from __future__ import annotations

import numpy as np


def shifted_exp(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(exp(y − max y) per row in float32, computed in place on a copy; max y (rows, 1)). float32's exp is
    several times as fast as float64's over a (rows, |V|) block; each term's relative error (~1e-7) stays
    that small in the float64 sums taken of them."""
    top = logits.max(axis=1, keepdims=True)
    e = np.subtract(logits, top, dtype=np.float32)
    np.exp(e, out=e)
    return e, top


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
