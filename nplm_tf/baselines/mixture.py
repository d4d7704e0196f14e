"""Mixing the network with an n-gram model, as the paper does (Section 4):

    P(w | h) = λ(h) P_nn(w | h) + (1 - λ(h)) P_ngram(w | h),

with λ fixed at 0.5, one λ fitted by maximum likelihood on validation data
(EM), or one λ per bucket of the context's train frequency (EM per bucket).
A mixture of two normalized distributions is normalized, so perplexity stays exact.
"""

from __future__ import annotations

import numpy as np

from nplm_tf import engines

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


def frequency_buckets(context_counts, num_buckets: int = 8, engine=engines.NUMPY):
    """Bucket 0 for unseen contexts, then by log2 of the count: 1, 2-3, 4-7, ... (last open), of an array of
    either engine (`engines.NUMPY`, `engines.TENSORFLOW`)."""
    buckets = engine.as_int(context_counts < 0)  # zeros: no count is negative
    for b in range(num_buckets - 1):
        buckets = buckets + engine.as_int(context_counts >= 2.0**b)
    return buckets


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


def pair_table(network_weight) -> np.ndarray:
    """The weights of a network and an n-gram, (buckets, 2), from the network's λ: one, or one per bucket
    (mixture.json's `context_frequency`)."""
    lam = np.atleast_1d(np.asarray(network_weight, np.float64))
    return np.stack([lam, 1.0 - lam], axis=1)


def context_weights(table, context_counts=None, engine=engines.NUMPY):
    """Each context's weights of the members, from `table` (buckets, members): the row of the context's
    frequency bucket (`context_counts`: the train count of each context under the n-gram whose counts the fit
    read), (T, members); with one row, or no counts, that row for every context, (members,)."""
    if table.shape[0] == 1 or context_counts is None:
        return table[0]
    return engine.gather(table, frequency_buckets(context_counts, int(table.shape[0]), engine))


def mix(values, weights):
    """Σ_i λ_i · values_i: the one place members are combined (networks, n-grams, caches), in either engine.
    `values`: each member's P in the members' order, (T,) per token or (T, |V|) per context; `weights`:
    `context_weights`' (T, members) or (members,). A mixture of normalized distributions is normalized."""
    total = None
    for i, value in enumerate(values):
        lam = weights[..., i]
        if len(lam.shape) == 1 and len(value.shape) == 2:
            lam = lam[:, None]
        total = lam * value if total is None else total + lam * value
    return total
