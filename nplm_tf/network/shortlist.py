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

import numpy as np
import tensorflow as tf

from nplm_tf.baselines import kneser_ney as kn
from nplm_tf.baselines import ngram_graph
from nplm_tf.baselines.ngram_graph import read
from nplm_tf.network import model as model_lib

HEAD = 256  # tail words `top_k` keeps by their unigram probability: it is exact for k up to this


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
        self.ranked = None

    def rank_tail(self) -> None:
        """Builds what `top_k` reads: the tail words seen after each context, most probable first.

        For each order k ≥ 2, `ranked[k]` lists the rows of order k whose word is in the tail, grouped by
        context and sorted by probability within each, and `starts[k]` is where each context's group begins
        (CSR offsets, one per (k-1)-gram plus one); order 1 keeps the tail's HEAD most probable unigrams.
        """
        if self.ranked is not None:
            return
        ngram, n = self.ngram, self.list_size  # the tables as the graph holds them
        unigram = ngram.probs[0].numpy()[n : ngram.vocab_size]
        self.head = tf.Variable(n + np.argsort(-unigram, kind="stable")[:HEAD].astype(np.int64), trainable=False)
        self.ranked, self.starts = [], []
        for k in range(2, ngram.order + 1):
            word, prob = ngram.words[k - 1].numpy(), ngram.probs[k - 1].numpy()
            context = ngram.keys[k - 1].numpy() // ngram.base  # keys are context id * base + word
            rows = np.flatnonzero(word >= n)
            rows = rows[np.lexsort((-prob[rows], context[rows]))]
            starts = np.searchsorted(context[rows], np.arange(int(ngram.keys[k - 2].shape[0]) + 1))
            self.ranked.append(tf.Variable(rows.astype(np.int64), trainable=False))
            self.starts.append(tf.Variable(starts.astype(np.int64), trainable=False))

    def list_mass(self, context: tf.Tensor, suffixes=None) -> tf.Tensor:
        """m(C) = Σ_{j∈L} P_ng(j | C), (batch,) float64."""
        context = tf.cast(context, tf.int64)
        suffixes = suffixes if suffixes is not None else self.ngram.suffix_ids(context)
        mass = tf.fill([tf.shape(context)[0]], self.base_mass)
        for k in range(2, self.ngram.order + 1):
            h = suffixes[k - 1]  # the context's last k-1 words, -1 when unseen (then so are the longer ones)
            seen = h >= 0
            gamma = tf.gather(read(self.ngram.backoffs[k - 2]), tf.maximum(h, 0))
            delta = tf.gather(read(self.deltas[k - 2]), tf.maximum(h, 0))
            mass = tf.where(seen, gamma * mass + delta, mass)
        return mass

    def log_prob(self, logits: tf.Tensor, context: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
        """ln P(target | context), (batch,) float64, from the network's logits (batch, N [+ 1])."""
        context, target = tf.cast(context, tf.int64), tf.cast(target, tf.int64)
        in_list = target < self.list_size
        column = tf.where(in_list, target, self.list_size if self.tail == "class" else 0)
        ln_nn = tf.cast(model_lib.log_softmax_at(logits, column), tf.float64)
        suffixes = self.ngram.suffix_ids(context)
        mass = self.list_mass(context, suffixes)
        ln_ng = tf.math.log(self.ngram.token_probabilities(context, target, suffixes))
        if self.tail == "class":
            return tf.where(in_list, ln_nn, ln_nn + ln_ng - tf.math.log(1.0 - mass))
        return tf.where(in_list, ln_nn + tf.math.log(mass), ln_ng)

    def distribution(self, logits: tf.Tensor, context: tf.Tensor) -> tf.Tensor:
        """P(· | context) over all |V| words, (batch, |V|) float64."""
        context = tf.cast(context, tf.int64)
        p_nn = tf.cast(tf.nn.softmax(logits), tf.float64)  # (batch, N [+ 1])
        p_ng = self.ngram.distribution(context)  # (batch, |V|)
        listed, scale = self.list_and_tail_scale(p_nn, self.list_mass(context))
        return tf.concat([listed, p_ng[:, self.list_size :] * scale[:, None]], axis=1)

    def list_and_tail_scale(self, p_nn: tf.Tensor, mass: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """(P(i | C) of the list words (batch, N), and the factor (batch,) that turns a tail word's P_ng into
        its P(i | C)), from the network's softmax (batch, N [+ 1]) and m(C), both float64."""
        n = self.list_size
        if self.tail == "class":
            return p_nn[:, :n], p_nn[:, n] / (1.0 - mass)
        return p_nn * mass[:, None], tf.ones_like(mass)

    def top_k(self, logits: tf.Tensor, context: tf.Tensor, k: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """The k most probable words over all |V| and their P: values (batch, k) float64, ids (batch, k) int64.

        `distribution` followed by a top-k, without building the (batch, |V|) distribution; exact for
        k ≤ HEAD (the caller falls back to `distribution` above it; `rank_tail` must have run). A tail word
        found after the context's suffix of order k (and no longer one) has P_ng = p_k(w | h_k) times the γ
        of the longer suffixes, and its value at any shorter suffix is at most that (interpolation only
        adds). So the tail's k best are among the k best of each suffix's tail successors (`ranked`) and
        the tail's k most probable unigrams, each valued at its own order and deduplicated by the largest
        value: at most order · k candidates per context, whatever the context.
        """
        context = tf.cast(context, tf.int64)
        n, ngram = self.list_size, self.ngram
        p_nn = tf.cast(tf.nn.softmax(logits), tf.float64)  # (batch, N [+ 1])
        suffixes = ngram.suffix_ids(context)
        listed, scale = self.list_and_tail_scale(p_nn, self.list_mass(context, suffixes))
        best = tf.math.top_k(listed, k=tf.minimum(k, n))
        # factor[k]: Π γ of the suffixes longer than k words, times the tail's scale
        factor, above = {}, scale
        for order in range(ngram.order, 1, -1):
            factor[order] = above
            h = suffixes[order - 1]
            gamma = tf.gather(read(ngram.backoffs[order - 2]), tf.maximum(h, 0))
            above = tf.where(h >= 0, above * gamma, above)
        factor[1] = above
        slots = tf.range(tf.cast(k, tf.int64))[None, :]  # (1, k)
        head = tf.gather(read(self.head), tf.minimum(slots[0], tf.size(self.head, out_type=tf.int64) - 1))
        words = [tf.tile(head[None, :], [tf.shape(context)[0], 1])]
        values = [tf.gather(read(ngram.probs[0]), words[0]) * factor[1][:, None]]
        for order in range(2, ngram.order + 1):
            h = suffixes[order - 1]
            starts = read(self.starts[order - 2])
            lo = tf.gather(starts, tf.maximum(h, 0))
            hi = tf.where(h >= 0, tf.gather(starts, tf.maximum(h, 0) + 1), lo)
            where = lo[:, None] + slots  # (batch, k)
            ranked = read(self.ranked[order - 2])
            row = tf.gather(ranked, tf.minimum(where, tf.maximum(tf.size(ranked, out_type=tf.int64) - 1, 0)))
            valid = where < hi[:, None]
            words.append(tf.where(valid, tf.gather(read(ngram.words[order - 1]), row), tf.constant(-1, tf.int64)))
            p = tf.gather(read(ngram.probs[order - 1]), row) * factor[order][:, None]
            values.append(tf.where(valid, p, tf.constant(-1.0, tf.float64)))
        words, values = tf.concat(words, axis=1), tf.concat(values, axis=1)  # (batch, order * k)
        # One entry per word: the largest value (its longest suffix's); ties keep the first.
        same = tf.equal(words[:, :, None], words[:, None, :])  # (batch, W, W)
        position = tf.range(tf.shape(words)[1])
        beaten = same & (
            (values[:, None, :] > values[:, :, None])
            | ((values[:, None, :] == values[:, :, None]) & (position[None, :] < position[:, None])[None])
        )
        values = tf.where(tf.reduce_any(beaten, axis=2) | (words < 0), tf.constant(-1.0, tf.float64), values)
        values = tf.concat([best.values, values], axis=1)
        ids = tf.concat([tf.cast(best.indices, tf.int64), words], axis=1)
        top = tf.math.top_k(values, k=k)
        return top.values, tf.gather(ids, top.indices, batch_dims=1)
