"""The short list of Goodfellow et al. eq. 12.10 in its first form: a sigmoid output says "the word is in the
tail", and a softmax over the N list words shares what is left.

With L the N most frequent words, T the rest, y the network's N + 1 outputs and s = y_N:

    P(i ∈ T | C) = σ(s),   P(i | C) = (1 − σ(s)) · softmax(y_0..N-1)_i for i in L,
    P(i | C) = σ(s) · P_ng(i | C) / (1 − m(C)) for i in T,

with P_ng the tail's Kneser-Ney model and m(C) its mass on L: exactly normalized over the vocabulary. The
class tail (`ngram_tail.ClassTail`) is the book's "slight modification" of it, the tail an extra softmax
output. Training minimizes −ln q(target) of the network's own q above (a tail target: −ln σ(s)); the n-gram
enters at scoring, through the same tables as the class tail's.
"""

from __future__ import annotations

import numpy as np

from nplm_tf import engines
from nplm_tf.network.heads import base, ngram_tail
from nplm_tf.network.heads.base import tf


class SigmoidTail(ngram_tail.NgramTail):
    name = "sigmoid"

    def initial_bias(self, counts) -> np.ndarray:
        """The list's frequencies normalized over the list, and s = the log-odds of the tail's train share."""
        counts, n = base.unigram(counts), self.list_size
        listed, tail = counts[:n], counts[n:].sum()
        return np.append(base.log_frequencies(listed), np.log(tail / listed.sum())).astype(np.float32)

    def _log_q_at(self, logits, column, engine=engines.TENSORFLOW):
        """ln q(column) per row, in the logits' float type (column N: the tail)."""
        n = self.list_size
        s = logits[:, n]
        listed = engine.log_softmax_at(logits[:, :n], engine.minimum(column, n - 1)) - engine.softplus(s)
        return engine.where(column >= n, -engine.softplus(-s), listed)

    def nll(self, targets, logits):
        targets = tf.cast(tf.reshape(targets, [-1]), tf.int32)
        return -self._log_q_at(tf.cast(logits, tf.float32), tf.minimum(targets, self.list_size))

    def network_probs(self, logits, engine=engines.TENSORFLOW):
        n = self.list_size
        s = engine.to64(logits[:, n : n + 1])  # σ in float64: q sums to 1 to float64's rounding
        return engine.concat([engine.to64(engine.softmax(logits[:, :n])) * engine.sigmoid(-s), engine.sigmoid(s)])

    def network_log_probs(self, logits, engine=engines.TENSORFLOW):
        n = self.list_size
        y = engine.to64(logits)
        s = y[:, n : n + 1]
        return engine.concat([engine.log_softmax(y[:, :n]) - engine.softplus(s), -engine.softplus(-s)], axis=1)

    def network_log_prob_at(self, logits, column, engine=engines.TENSORFLOW):
        return self._log_q_at(engine.to64(logits), engine.int64(column), engine)  # scored in float64
