"""Mixing the network with an n-gram model, as the paper does (Section 4):

    P(w | h) = λ(h) P_nn(w | h) + (1 - λ(h)) P_ngram(w | h),

with λ fixed at 0.5, one λ fitted by maximum likelihood on validation data
(EM), or one λ per bucket of the context's train frequency (EM per bucket).
A mixture of two normalized distributions is normalized, so perplexity stays exact.
"""

from __future__ import annotations

import numpy as np

EM_ITERATIONS = 100


def em_weight(
    p_a: np.ndarray, p_b: np.ndarray, iterations: int = EM_ITERATIONS, start: float = 0.5
) -> tuple[float, list[float]]:
    """The λ maximizing Σ ln(λ p_a + (1-λ) p_b), by EM; also each iteration's mean log-likelihood."""
    lam, trace = start, []
    for _ in range(iterations):
        mixed = lam * p_a + (1 - lam) * p_b
        trace.append(float(np.log(mixed).mean()))
        lam = float(np.mean(lam * p_a / mixed))  # E-step posterior, M-step mean
    return lam, trace


def frequency_buckets(context_counts: np.ndarray, num_buckets: int = 8) -> np.ndarray:
    """Bucket 0 for unseen contexts, then by log2 of the count: 1, 2-3, 4-7, ... (last open)."""
    buckets = np.zeros(context_counts.shape, np.int64)
    seen = context_counts > 0
    buckets[seen] = 1 + np.floor(np.log2(context_counts[seen])).astype(np.int64)
    return np.minimum(buckets, num_buckets - 1)


def bucket_weights(p_a: np.ndarray, p_b: np.ndarray, buckets: np.ndarray, num_buckets: int) -> np.ndarray:
    """One EM λ per bucket; a bucket without validation tokens gets the global λ."""
    overall, _ = em_weight(p_a, p_b)
    weights = np.full(num_buckets, overall)
    for b in range(num_buckets):
        mask = buckets == b
        if mask.any():
            weights[b], _ = em_weight(p_a[mask], p_b[mask])
    return weights


def mix(p_a: np.ndarray, p_b: np.ndarray, weight) -> np.ndarray:
    weight = np.asarray(weight)
    return weight * p_a + (1 - weight) * p_b
