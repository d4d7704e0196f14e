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
    return _per_bucket(lambda mask: em_weight(p_a[mask], p_b[mask])[0], buckets, num_buckets)


def em_weights(probs: np.ndarray, iterations: int = EM_ITERATIONS) -> tuple[np.ndarray, list[float]]:
    """The k weights maximizing Σ_t ln Σ_i λ_i p_i(t) (probs: (k, T)), by EM from uniform weights: an ensemble's
    (`tools.ensemble`); also each iteration's mean log-likelihood (never lower than the one before)."""
    k = probs.shape[0]
    weights, trace = np.full(k, 1.0 / k), []
    for _ in range(iterations):
        mixed = weights @ probs
        trace.append(float(np.log(mixed).mean()))
        weights = (weights[:, None] * probs / mixed).mean(axis=1)  # posteriors, then their mean
    return weights, trace


def bucket_em_weights(probs: np.ndarray, buckets: np.ndarray, num_buckets: int) -> np.ndarray:
    """`em_weights` per bucket, (num_buckets, k); a bucket without validation tokens gets the global weights."""
    return _per_bucket(lambda mask: em_weights(probs[:, mask])[0], buckets, num_buckets)


def _per_bucket(fit, buckets: np.ndarray, num_buckets: int) -> np.ndarray:
    """`fit(mask)` for each bucket's tokens, stacked; `fit` of every token where a bucket has none."""
    overall = np.asarray(fit(np.ones(buckets.shape, bool)), np.float64)
    weights = np.tile(overall, (num_buckets,) + (1,) * overall.ndim)
    for b in range(num_buckets):
        mask = buckets == b
        if mask.any():
            weights[b] = fit(mask)
    return weights


def mix(p_a: np.ndarray, p_b: np.ndarray, weight) -> np.ndarray:
    weight = np.asarray(weight)
    return weight * p_a + (1 - weight) * p_b
