"""A short list's exact probabilities over the whole vocabulary: the network's list, the n-gram's tail.

With L the N most frequent words (ids 0..N-1), T the rest, P_ng a Kneser-Ney model and
m(C) = Σ_{j∈L} P_ng(j | C) (Goodfellow et al. §12.4.3.1; Schwenk 2007):

- `class` tail: P(i | C) = P_nn(i | C) for i in L, and P_nn(tail | C) · P_ng(i | C) / (1 − m(C)) for i in T;
- `backoff` tail: P(i | C) = P_nn(i | C) · m(C) for i in L, and P_ng(i | C) for i in T.

Both sum to one over V. m(C) is exact and cheap: it recurses through the context's suffixes
(`KneserNey.list_mass_tables`), touching only the list words seen after each, never all of L. Everything
here is core TensorFlow ops in float64, so the same module scores in evaluation and in the SavedModel.
Contexts are (batch, c) int64 ids, oldest first, `<s>`-padded.
"""

from __future__ import annotations

import tensorflow as tf

from nplm_tf.baselines import kneser_ney as kn
from nplm_tf.baselines import ngram_graph


class ShortListTail(tf.Module):
    """Exact P(w | C) from a short-list network's logits and the Kneser-Ney model of its tail.

    Args:
      ngram: the tail's `KneserNey` model, on the network's vocabulary.
      list_size: N.
      tail: "class" (logits have N + 1 columns, the last "in the tail") or "backoff" (N columns).
    """

    def __init__(self, ngram: kn.KneserNey, list_size: int, tail: str, name: str = "shortlist_tail"):
        super().__init__(name=name)
        if not isinstance(ngram, kn.KneserNey):
            raise kn.NgramError("a short list's tail needs a Kneser-Ney model (nplm_tf.ngram --smoothing=kneser_ney).")
        if not 0 < list_size <= ngram.vocab_size:
            raise kn.NgramError(f"list_size={list_size} must be in [1, |V| = {ngram.vocab_size}].")
        self.list_size, self.tail, self.vocab_size = int(list_size), tail, ngram.vocab_size
        self.ngram = ngram_graph.ServingKneserNey(ngram, [1.0], name="tail_ngram")
        base, deltas = ngram.list_mass_tables(list_size)
        self.base_mass = tf.constant(base, tf.float64)
        self.deltas = [tf.Variable(d, dtype=tf.float64, trainable=False) for d in deltas]

    def list_mass(self, context: tf.Tensor) -> tf.Tensor:
        """m(C) = Σ_{j∈L} P_ng(j | C), (batch,) float64."""
        context = tf.cast(context, tf.int64)
        suffixes = self.ngram.suffix_ids(context)
        mass = tf.fill([tf.shape(context)[0]], self.base_mass)
        for k in range(2, self.ngram.order + 1):
            h = suffixes[k - 1]  # the context's last k-1 words, -1 when unseen (then so are the longer ones)
            seen = h >= 0
            gamma = tf.gather(self.ngram.backoffs[k - 2], tf.maximum(h, 0))
            delta = tf.gather(self.deltas[k - 2], tf.maximum(h, 0))
            mass = tf.where(seen, gamma * mass + delta, mass)
        return mass

    def log_prob(self, logits: tf.Tensor, context: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
        """ln P(target | context), (batch,) float64, from the network's logits (batch, N [+ 1])."""
        context, target = tf.cast(context, tf.int64), tf.cast(target, tf.int64)
        in_list = target < self.list_size
        column = tf.where(in_list, target, self.list_size if self.tail == "class" else 0)
        ln_nn = tf.cast(tf.gather(tf.nn.log_softmax(logits), column, batch_dims=1), tf.float64)
        mass = self.list_mass(context)
        ln_ng = tf.math.log(self.ngram.token_probabilities(context, target))
        if self.tail == "class":
            return tf.where(in_list, ln_nn, ln_nn + ln_ng - tf.math.log(1.0 - mass))
        return tf.where(in_list, ln_nn + tf.math.log(mass), ln_ng)

    def distribution(self, logits: tf.Tensor, context: tf.Tensor) -> tf.Tensor:
        """P(· | context) over all |V| words, (batch, |V|) float64."""
        context = tf.cast(context, tf.int64)
        n = self.list_size
        p_nn = tf.cast(tf.nn.softmax(logits), tf.float64)  # (batch, N [+ 1])
        p_ng = self.ngram.distribution(context)  # (batch, |V|)
        mass = self.list_mass(context)[:, None]
        if self.tail == "class":
            return tf.concat([p_nn[:, :n], p_nn[:, n:] * p_ng[:, n:] / (1.0 - mass)], axis=1)
        return tf.concat([p_nn * mass, p_ng[:, n:]], axis=1)
