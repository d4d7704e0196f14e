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

from nplm_tf.network.heads import base, ngram_tail, np_ops
from nplm_tf.network.heads.base import tf


class SigmoidTail(ngram_tail.NgramTail):
    name = "sigmoid"

    def initial_bias(self, counts) -> np.ndarray:
        """The list's frequencies normalized over the list, and s = the log-odds of the tail's train share."""
        counts, n = base.unigram(counts), self.list_size
        listed, tail = counts[:n], counts[n:].sum()
        return np.append(base.log_frequencies(listed), np.log(tail / listed.sum())).astype(np.float32)

    def _log_q_at(self, logits, column):
        """ln q(column) per row, in the logits' float type (column N: the tail)."""
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.network.heads import ops

        n = self.list_size
        s = logits[:, n]
        listed = ops.log_softmax_at(logits[:, :n], tf.minimum(column, n - 1)) - tf.nn.softplus(s)
        return tf.where(column >= n, -tf.nn.softplus(-s), listed)

    def nll(self, targets, logits):
        targets = tf.cast(tf.reshape(targets, [-1]), tf.int32)
        return -self._log_q_at(tf.cast(logits, tf.float32), tf.minimum(targets, self.list_size))

    def network_probs(self, logits):
        n = self.list_size
        s = logits[:, n : n + 1]
        q = tf.concat([tf.nn.softmax(logits[:, :n]) * tf.sigmoid(-s), tf.sigmoid(s)], axis=1)
        return tf.cast(q, tf.float64)

    def network_log_probs(self, logits):
        n = self.list_size
        y = tf.cast(logits, tf.float64)
        s = y[:, n : n + 1]
        return tf.concat([tf.nn.log_softmax(y[:, :n]) - tf.nn.softplus(s), -tf.nn.softplus(-s)], axis=1)

    def network_log_prob_at(self, logits, column):
        return tf.cast(self._log_q_at(logits, tf.cast(column, tf.int64)), tf.float64)

    def np_network_probs(self, logits):
        n = self.list_size
        s = logits[:, n : n + 1].astype(np.float64)
        return np.concatenate([np_ops.softmax(logits[:, :n]) / (1.0 + np.exp(s)), 1.0 / (1.0 + np.exp(-s))], axis=1)

    def np_network_log_prob_at(self, logits, column):
        n = self.list_size
        s = logits[:, n].astype(np.float64)
        listed = np_ops.log_softmax_at(logits[:, :n], np.minimum(column, n - 1)) - np.logaddexp(0.0, s)
        return np.where(column >= n, -np.logaddexp(0.0, -s), listed)
