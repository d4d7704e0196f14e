"""An n-gram model's tables as TensorFlow state, queried in the serving graph.

The lookups by context (`suffix_ids`, `extend`, and Kneser-Ney's `token_probabilities`) are
`suffixes.SuffixLookup`'s, written once for both engines; here they run on the tables as variables, in core
TensorFlow ops, so the SavedModel needs no custom op and no Python. Each query reproduces the numpy model's
`token_probabilities` / `distribution` and context counts exactly (float64 throughout).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from nplm_tf import engines
from nplm_tf.baselines import interpolated, mixture, suffixes
from nplm_tf.baselines import kneser_ney as kn

NONE = suffixes.NONE


def _state(array, dtype) -> tf.Variable:
    return tf.Variable(np.asarray(array), dtype=dtype, trainable=False)


read = engines.TENSORFLOW.read  # a table as a tensor to gather from (no copy-on-read mode)


class ServingNgram(tf.Module, suffixes.SuffixLookup):
    """The trie shared by both n-gram models, and the weights of the mixture it was fitted in.

    Args:
      tables: a `kneser_ney.KneserNey` holding the n-gram numbering.
      weights: the network's λ per context-frequency bucket (mixture.json's `context_frequency`): kept as
        the two members' table (`mixture.pair_table`), which the server mixes with (`mixture.mix`); None for
        an n-gram in no such mixture (an ensemble's, which holds its own weights, or a short list's tail).
    """

    engine = engines.TENSORFLOW

    def __init__(self, tables: kn.KneserNey, weights: list[float] | None, name: str):
        super().__init__(name=name)
        if not np.array_equal(tables.orders[1].keys, np.arange(tables.base)):
            raise kn.NgramError("the n-gram model's unigram table does not cover every word id; rebuild it.")
        self.order, self.base, self.vocab_size = tables.order, tables.base, tables.vocab_size
        orders = range(1, tables.order + 1)
        self.keys = [_state(tables.orders[k].keys, tf.int64) for k in orders]  # a key's word is key % base
        self.mixture_table = mixture.pair_table(weights) if weights is not None else None
        self.context_totals = _state(tables.context_totals(), tf.float64)  # train count of each (N-1)-gram

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
