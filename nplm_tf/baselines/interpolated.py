"""The paper's interpolated trigram (deleted interpolation, Jelinek & Mercer 1980):

    p(w | u v) = λ3 f(w | u v) + λ2 f(w | v) + λ1 f(w) + λ0 / |V|,

f the relative frequencies in train, and the λ (one set per bucket of the
context's train count c(u v)) fitted by EM on validation data, as Bengio et
al. (2003) describe. Where a context was never seen, its relative frequency
is replaced by the next lower order's, so every distribution sums to one.
"""

from __future__ import annotations

import numpy as np

from nplm_tf.baselines import kneser_ney as kn
from nplm_tf.baselines import mixture

NUM_BUCKETS = 8
EM_ITERATIONS = 50


class InterpolatedTrigram:
    """Deleted-interpolation trigram over ids 0 .. V-1 (id V is `<s>`).

    Args:
      train: the training split as `kn.TokenArrays`.
      valid: held-out data on which the λ are fitted by EM.
      vocab_size: |V|.
    """

    order = 3

    def __init__(
        self,
        train: kn.TokenArrays | None,
        valid: kn.TokenArrays | None,
        vocab_size: int,
        *,
        tables: kn.KneserNey | None = None,
        lambdas: np.ndarray | None = None,
    ):
        """Counted on `train`, its λ fitted on `valid`; or, with `train` None, the model of the given n-gram
        `tables` and `lambdas` (`from_state`)."""
        self.vocab_size = vocab_size
        self.tables = tables if train is None else kn.KneserNey(train, 3, vocab_size)  # numbering, raw counts
        self._frequencies()
        if train is None:
            self.lambdas = np.asarray(lambdas)
            return
        self.lambdas = np.full((NUM_BUCKETS, 4), 0.25)
        components, buckets = self._components(valid)
        for b in range(NUM_BUCKETS):
            mask = buckets == b
            if mask.any():
                self.lambdas[b] = _em(components[mask])

    def get_state(self) -> dict[str, np.ndarray]:
        """The n-gram tables' state, then the fitted weights (the relative frequencies are derived from the tables)."""
        return {**self.tables.get_state(), "kind": np.array(type(self).__name__), "lambdas": self.lambdas}

    @classmethod
    def from_state(cls, state) -> "InterpolatedTrigram":
        tables = kn.KneserNey.from_state(state)
        return cls(None, None, tables.vocab_size, tables=tables, lambdas=state["lambdas"])

    def _frequencies(self):
        """Relative frequencies f1 (per word), f2, f3 (per n-gram) and context totals, once."""
        orders = self.tables.orders
        counts = orders[1].raw.copy()
        counts[self.vocab_size] = 0.0  # <s> is never predicted
        self.f1 = counts / counts.sum()
        self.f, self.totals = {}, {}
        for k in (2, 3):
            o = orders[k]
            self.totals[k] = np.bincount(o.context, weights=o.raw, minlength=orders[k - 1].keys.size)
            self.f[k] = o.raw / self.totals[k][o.context]

    def _components(self, data: kn.TokenArrays):
        """(T, 4) relative frequencies [f3, f2, f1, 1/V] per predicted token, and context buckets."""
        tokens, offset = data.tokens, data.offset
        bid = self.tables.extend_ids(tokens, data, 2)  # (v w)
        tid = self.tables.extend_ids(bid, data, 3)  # (u v w)
        prev_bigram = np.where(offset >= 2, np.roll(bid, 1), -1)  # (u v)
        p1 = self.f1[tokens]
        v_seen = (self.totals[2][np.roll(tokens, 1)] > 0) & (offset >= 1)
        p2 = np.where(v_seen, np.where(bid >= 0, self.f[2][np.maximum(bid, 0)], 0.0), p1)
        context_count = np.where(prev_bigram >= 0, self.totals[3][np.maximum(prev_bigram, 0)], 0.0)
        p3 = np.where(context_count > 0, np.where(tid >= 0, self.f[3][np.maximum(tid, 0)], 0.0), p2)
        keep = data.predicted
        components = np.stack([p3, p2, p1, np.full(tokens.size, 1.0 / self.vocab_size)], axis=1)[keep]
        return components, mixture.frequency_buckets(context_count[keep], NUM_BUCKETS)

    def token_probabilities(self, data: kn.TokenArrays) -> np.ndarray:
        components, buckets = self._components(data)
        return (components * self.lambdas[buckets]).sum(axis=1)

    def context_counts(self, data: kn.TokenArrays) -> np.ndarray:
        return self.tables.context_counts(data)

    def distribution(self, context: list[int]) -> np.ndarray:
        """p(· | context) over the |V| types (context oldest first; the last two words count)."""
        context = list(context)[-2:]
        if self.tables.bos_id in context:
            context = context[context.index(self.tables.bos_id) :]
        V, base = self.vocab_size, self.tables.base
        p1 = self.f1[:V]
        p2, p3, count = p1, None, 0.0
        if context:
            o2 = self.tables.orders[2]
            v = context[-1]
            lo, hi = np.searchsorted(o2.keys, [v * base, (v + 1) * base])
            if hi > lo:
                p2 = np.zeros(V)
                p2[o2.word[lo:hi]] = self.f[2][lo:hi]
            if len(context) == 2:
                h = int(o2.lookup(np.array([context[0] * base + v]))[0])
                if h >= 0:
                    o3 = self.tables.orders[3]
                    count = float(self.totals[3][h])
                    lo, hi = np.searchsorted(o3.keys, [h * base, (h + 1) * base])
                    if hi > lo:
                        p3 = np.zeros(V)
                        p3[o3.word[lo:hi]] = self.f[3][lo:hi]
        p3 = p2 if p3 is None else p3
        lam = self.lambdas[mixture.frequency_buckets(np.array([count]), NUM_BUCKETS)[0]]
        return lam[0] * p3 + lam[1] * p2 + lam[2] * p1 + lam[3] / V


def _em(components: np.ndarray, iterations: int = EM_ITERATIONS) -> np.ndarray:
    """Mixture weights over the columns of `components` maximizing Σ ln(components · λ)."""
    lam = np.full(components.shape[1], 1.0 / components.shape[1])
    for _ in range(iterations):
        mixed = components @ lam
        lam = (components * lam / mixed[:, None]).mean(axis=0)
    return lam
