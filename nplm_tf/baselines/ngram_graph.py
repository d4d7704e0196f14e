"""An n-gram model's tables as TensorFlow state, queried in the serving graph.

The n-grams of order k are stored as `kneser_ney.Order` stores them: sorted
int64 keys `context id * B + word`, where the context id is the row of the
(k-1)-gram prefix in order k-1 (a trie spread over sorted arrays). Lookups are
`tf.searchsorted` over those keys: core TensorFlow ops, so the SavedModel
needs no custom op and no Python. Each query reproduces the numpy model's
`token_probabilities` / `distribution` and context counts
exactly (float64 throughout).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from nplm_tf import engines
from nplm_tf.baselines import interpolated, mixture
from nplm_tf.baselines import kneser_ney as kn

NONE = -1  # "absent": an n-gram id, or a query that cannot match


def _state(array, dtype) -> tf.Variable:
    return tf.Variable(np.asarray(array), dtype=dtype, trainable=False)


def read(table: tf.Variable) -> tf.Tensor:
    """The table as a tensor, to gather from. `tf.gather` on the variable itself is a sparse read, which puts
    it in copy-on-read mode: every later dense read (`tf.searchsorted`) would copy the whole table, megabytes
    per query. Reading it whole (no copy while nothing writes it) and gathering from that avoids it."""
    return tf.convert_to_tensor(table)


class ServingNgram(tf.Module):
    """The trie shared by both n-gram models, and the weights of the mixture it was fitted in.

    Args:
      tables: a `kneser_ney.KneserNey` holding the n-gram numbering.
      weights: the network's λ per context-frequency bucket (mixture.json's `context_frequency`): kept as
        the two members' table (`mixture.pair_table`), which the server mixes with (`mixture.mix`); None for
        an n-gram in no such mixture (an ensemble's, which holds its own weights, or a short list's tail).
    """

    def __init__(self, tables: kn.KneserNey, weights: list[float] | None, name: str):
        super().__init__(name=name)
        if not np.array_equal(tables.orders[1].keys, np.arange(tables.base)):
            raise kn.NgramError("the n-gram model's unigram table does not cover every word id; rebuild it.")
        self.order, self.base, self.vocab_size = tables.order, tables.base, tables.vocab_size
        orders = range(1, tables.order + 1)
        self.keys = [_state(tables.orders[k].keys, tf.int64) for k in orders]  # a key's word is key % base
        self.mixture_table = mixture.pair_table(weights) if weights is not None else None
        self.context_totals = _state(tables.context_totals(), tf.float64)  # train count of each (N-1)-gram

    def lookup(self, k: int, query: tf.Tensor) -> tf.Tensor:
        """Row of each key in order k, -1 where absent or where the query is negative; any shape."""
        keys = read(self.keys[k - 1])
        flat = tf.reshape(query, [-1])
        where = tf.cast(tf.searchsorted(keys, flat, side="left"), tf.int64)
        clipped = tf.minimum(where, tf.cast(tf.size(keys) - 1, tf.int64))
        found = (tf.gather(keys, clipped) == flat) & (flat >= 0)
        return tf.reshape(tf.where(found, clipped, tf.constant(NONE, tf.int64)), tf.shape(query))

    def extend(self, k: int, prefix_ids: tf.Tensor, words: tf.Tensor) -> tf.Tensor:
        """Ids of the k-grams (prefix, word); -1 where the prefix or the k-gram is absent."""
        return self.lookup(k, tf.where(prefix_ids >= 0, prefix_ids * self.base + words, tf.constant(NONE, tf.int64)))

    def suffix_ids(self, context: tf.Tensor) -> list[tf.Tensor]:
        """context (T, c) ids, oldest first -> s[j] (T,): id of its last j words (j < order), -1 if unseen.

        The suffix of j words is found from its oldest word forwards, one order's table per word; all suffixes
        take their i-th step together, one lookup per order (not one per suffix and order).
        """
        c = context.shape[1]
        top = min(self.order - 1, c)
        s = [None]
        if top >= 1:
            chains = context[:, c - top :]  # column top - j: the suffix of j words, found up to its current length
            for i in range(2, top + 1):  # every suffix of at least i words takes its i-th word, in order i
                live = top - i + 1
                step = self.extend(i, chains[:, :live], context[:, c - top + i - 1 :])
                chains = tf.concat([step, chains[:, live:]], axis=1)
            s += [chains[:, top - j] for j in range(1, top + 1)]
        while len(s) < self.order:  # a context shorter than order - 1 has no longer suffixes
            s.append(-tf.ones_like(context[:, 0]))
        return s

    def continuations(self, k: int, h: tf.Tensor, values: tf.Variable, base: tf.Tensor) -> tf.Tensor:
        """`base` (B, |V|) with the entries of each row's context h's continuations in order k set from `values`."""
        bounds = tf.reshape(tf.stack([h * self.base, (h + 1) * self.base], axis=1), [-1])
        lo_hi = tf.reshape(tf.cast(tf.searchsorted(self.keys[k - 1], bounds, side="left"), tf.int64), [-1, 2])
        lo = lo_hi[:, 0]
        spans = tf.ragged.range(lo, tf.where(h >= 0, lo_hi[:, 1], lo))  # (B, (continuations))
        index = spans.flat_values
        words = tf.math.floormod(tf.gather(read(self.keys[k - 1]), index), self.base)
        where = tf.stack([tf.cast(spans.value_rowids(), tf.int64), words], axis=1)
        return tf.tensor_scatter_nd_update(base, where, tf.gather(read(values), index))

    def context_count(self, context: tf.Tensor) -> tf.Tensor:
        """Each context's train count (T,) float64, the count of its last K - 1 words, as
        `KneserNey.context_counts` gives it: what a mixture's context-frequency bucket reads."""
        if self.order == 1:
            return tf.fill([tf.shape(context)[0]], self.context_totals[0])
        h = self.suffix_ids(context)[self.order - 1]
        return tf.where(h >= 0, tf.gather(read(self.context_totals), tf.maximum(h, 0)), tf.zeros_like(h, tf.float64))


class ServingKneserNey(ServingNgram):
    """Interpolated modified Kneser-Ney p(w | h) in the graph (`kneser_ney.KneserNey`)."""

    def __init__(self, model: kn.KneserNey, weights: list[float] | None = None, name: str = "kneser_ney"):
        super().__init__(model, weights, name)
        self.probs = [_state(model.orders[k].prob, tf.float64) for k in range(1, model.order + 1)]
        self.backoffs = [_state(model.orders[k].backoff, tf.float64) for k in range(1, model.order + 1)]

    def token_probabilities(self, context: tf.Tensor, target: tf.Tensor, suffixes=None) -> tf.Tensor:
        """p(target | context), (T,) float64; context (T, c) int64 oldest first (`suffixes`: its `suffix_ids`)."""
        s = suffixes if suffixes is not None else self.suffix_ids(context)
        p = tf.gather(read(self.probs[0]), target)
        backoff = tf.ones_like(p)
        for k in range(2, self.order + 1):
            h = s[k - 1]
            kid = self.extend(k, h, target)
            found = kid >= 0
            p = tf.where(found, tf.gather(read(self.probs[k - 1]), tf.maximum(kid, 0)), p)
            gamma = tf.gather(read(self.backoffs[k - 2]), tf.maximum(h, 0))
            backoff = tf.where(found, tf.ones_like(backoff), tf.where(h >= 0, backoff * gamma, backoff))
        return p * backoff

    def distribution(self, context: tf.Tensor) -> tf.Tensor:
        """p(· | context) over the |V| types, (B, |V|) float64; context (B, c) oldest first."""
        s = self.suffix_ids(context)
        probs = tf.tile(self.probs[0][None, : self.vocab_size], [tf.shape(context)[0], 1])  # (B, |V|)
        for k in range(2, self.order + 1):
            h = s[k - 1]
            # A listed context's β applies also when no n-gram follows it (an ARPA file may list one so).
            gamma = tf.where(
                h >= 0, tf.gather(read(self.backoffs[k - 2]), tf.maximum(h, 0)), tf.ones_like(h, tf.float64)
            )
            probs = self.continuations(k, h, self.probs[k - 1], probs * gamma[:, None])
        return probs


class ServingInterpolated(ServingNgram):
    """The paper's deleted-interpolation trigram in the graph (`interpolated.InterpolatedTrigram`)."""

    def __init__(
        self, model: interpolated.InterpolatedTrigram, weights: list[float] | None = None, name: str = "interpolated"
    ):
        super().__init__(model.tables, weights, name)
        self.f1 = _state(model.f1, tf.float64)
        self.f2, self.f3 = _state(model.f[2], tf.float64), _state(model.f[3], tf.float64)
        self.totals2, self.totals3 = _state(model.totals[2], tf.float64), _state(model.totals[3], tf.float64)
        self.lambdas = _state(model.lambdas, tf.float64)  # (buckets, 4): weights of f3, f2, f1, uniform

    def _context(self, context):
        u, v = context[:, -2], context[:, -1]
        uv = self.extend(2, u, v)  # (T,) -1 for (<s>, <s>) and unseen pairs
        count = tf.where(uv >= 0, tf.gather(read(self.totals3), tf.maximum(uv, 0)), tf.zeros_like(uv, tf.float64))
        buckets = mixture.frequency_buckets(count, int(self.lambdas.shape[0]), engines.TENSORFLOW)
        lam = tf.gather(read(self.lambdas), buckets)  # (T, 4)
        return v, uv, count, lam, tf.gather(read(self.totals2), v) > 0

    def token_probabilities(self, context: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
        v, uv, count, lam, v_seen = self._context(context)
        p1 = tf.gather(read(self.f1), target)
        bid, tid = self.extend(2, v, target), self.extend(3, uv, target)
        zero = tf.zeros_like(p1)
        p2 = tf.where(v_seen, tf.where(bid >= 0, tf.gather(read(self.f2), tf.maximum(bid, 0)), zero), p1)
        p3 = tf.where(count > 0, tf.where(tid >= 0, tf.gather(read(self.f3), tf.maximum(tid, 0)), zero), p2)
        return lam[:, 0] * p3 + lam[:, 1] * p2 + lam[:, 2] * p1 + lam[:, 3] / self.vocab_size

    def distribution(self, context: tf.Tensor) -> tf.Tensor:
        v, uv, count, lam, v_seen = self._context(context)
        p1 = tf.tile(self.f1[None, : self.vocab_size], [tf.shape(context)[0], 1])  # (B, |V|)
        zeros = tf.zeros_like(p1)
        p2 = tf.where(v_seen[:, None], self.continuations(2, v, self.f2, zeros), p1)
        p3 = tf.where((count > 0)[:, None], self.continuations(3, uv, self.f3, zeros), p2)
        return lam[:, 0:1] * p3 + lam[:, 1:2] * p2 + lam[:, 2:3] * p1 + lam[:, 3:4] / self.vocab_size


def serving_model(model, weights: list[float] | None = None) -> ServingNgram:
    if isinstance(model, interpolated.InterpolatedTrigram):
        return ServingInterpolated(model, weights)
    return ServingKneserNey(model, weights)
