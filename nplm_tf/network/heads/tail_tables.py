"""The tables and graph code of a short list's n-gram tail: exact probabilities over the whole vocabulary.

With L the N most frequent words (ids 0..N-1), T the rest, P_ng a Kneser-Ney model and
m(C) = Σ_{j∈L} P_ng(j | C) (Goodfellow et al. §12.4.3.1; Schwenk 2007), a head whose network has a "tail"
output (`head.tail_output`: the class and sigmoid tails, `ngram_tail`, `sigmoid`) gives

    P(i | C) = q(i | C) for i in L, and q(tail | C) · P_ng(i | C) / (1 − m(C)) for i in T,

and one without it (the back-off tail) P(i | C) = q(i | C) · m(C) for i in L, and P_ng(i | C) for i in T, with
q the network's distribution over its outputs (`head.network_probs`). Both sum to one over V. m(C) is exact and cheap: it recurses through the context's suffixes
(`kn_short_list.short_list_tables`), touching only the list words seen after each, never all of L. Everything
here is core TensorFlow ops in float64, so the same module scores in evaluation and in the SavedModel.
Contexts are (batch, c) int64 ids, oldest first, `<s>`-padded.
"""

from __future__ import annotations

import types

import numpy as np
import tensorflow as tf

from nplm_tf.baselines import kn_short_list, ngram_graph
from nplm_tf.baselines import kneser_ney as kn
from nplm_tf.baselines.ngram_graph import read


def id_table(values: np.ndarray, bound: int) -> tf.Variable:
    """Word ids or offsets (all in [-1, bound]) as a table: int32 when `bound` fits (half the bytes in an
    export), else int64. Graph code keeps what it reads in the table's type and casts its result once."""
    return tf.Variable(values.astype(np.int32 if bound <= np.iinfo(np.int32).max else np.int64), trainable=False)


class ShortListTail(tf.Module):
    """Exact P(w | C) from a short-list network's logits and the Kneser-Ney model of its tail.

    Args:
      ngram: the tail's `KneserNey` model, on the network's vocabulary.
      list_size: N.
      head: the head (`ngram_tail.NgramTail`): the network's own distribution q over its outputs
        (`network_probs`, `network_log_probs`, `network_log_prob_at`) and whether its last output is the tail
        (`tail_output`).
    """

    def __init__(self, ngram: kn.KneserNey, list_size: int, head, name: str = "shortlist_tail"):
        super().__init__(name=name)
        if not isinstance(ngram, kn.KneserNey):
            raise kn.NgramError("a short list's tail needs a Kneser-Ney model (nplm_tf.ngram --smoothing=kneser_ney).")
        if not 0 < list_size <= ngram.vocab_size:
            raise kn.NgramError(f"list_size={list_size} must be in [1, |V| = {ngram.vocab_size}].")
        self.list_size, self.vocab_size = int(list_size), ngram.vocab_size
        self.owner = head  # plain Python: not tracked by tf.Module
        self.ngram = ngram_graph.ServingKneserNey(ngram, name="tail_ngram")
        base, deltas, tail_discounted = kn_short_list.short_list_tables(ngram, list_size)
        self.base_mass = tf.constant(base, tf.float64)
        self.deltas = [tf.Variable(d, dtype=tf.float64, trainable=False) for d in deltas]
        # p̃ of the tail n-grams, for `rank_tail` (a namespace, so tf.Module does not track the arrays)
        self._discounted = types.SimpleNamespace(orders=tail_discounted)
        self.ranked_words = None

    def rank_tail(self) -> None:
        """Builds what `top_k` reads: the tail words seen after each context, most probable first.

        The contexts of every order k ≥ 2 (the (k-1)-grams) are numbered one after another, order 2's first
        (`context_offsets`); `starts[g]` is where context g's tail successors begin in `ranked_words` /
        `ranked_probs` (CSR offsets, one per context plus one), sorted by p_k(w | h) within each. Order 1 ranks
        the whole tail by its unigram probability (`head`, `head_probs`). Each table ends with a word -1 of
        probability 0, so that it is never empty. What `sample` reads: `ranked_cumulative[i]`, the sum of p̃ over
        the entries before i (so a context's tail mass in p̃ is the difference at its two offsets), and
        `head_cumulative`, the same over `head`'s unigram probabilities.
        """
        if self.ranked_words is not None:
            return
        ngram, n = self.ngram, self.list_size  # the tables as the graph holds them
        unigram = ngram.probs[0].numpy()
        head = n + np.argsort(-unigram[n : ngram.vocab_size], kind="stable")
        self.head = id_table(np.append(head, -1), ngram.vocab_size)
        self.head_probs = tf.Variable(np.append(unigram[head], 0.0), dtype=tf.float64, trainable=False)
        self.head_cumulative = tf.Variable(np.cumsum(np.append(0.0, unigram[head])), trainable=False)
        offsets, starts, words, probs, own = [], [], [], [], []
        contexts = total = 0  # contexts and tail successors so far
        for k in range(2, ngram.order + 1):
            keys, prob = ngram.keys[k - 1].numpy(), ngram.probs[k - 1].numpy()
            context, word = np.divmod(keys, ngram.base)  # keys are context id * base + word
            rows = np.flatnonzero(word >= n)
            ranking = np.lexsort((-prob[rows], context[rows]))
            rows = rows[ranking]
            size = int(ngram.keys[k - 2].shape[0])  # order k's contexts are the (k-1)-grams
            offsets.append(contexts)
            starts.append(total + np.searchsorted(context[rows], np.arange(size)))
            contexts += size
            words.append(word[rows])
            probs.append(prob[rows])
            own.append(self._discounted.orders[k - 2][ranking])
            total += rows.size
        starts.append(np.array([total]))
        self.context_offsets = tf.constant(np.array(offsets, np.int64))
        self.starts = id_table(np.concatenate(starts), total)
        self.ranked_words = id_table(np.concatenate(words + [[-1]]), ngram.vocab_size)
        self.ranked_probs = tf.Variable(np.concatenate(probs + [[0.0]]), dtype=tf.float64, trainable=False)
        self.ranked_cumulative = tf.Variable(np.cumsum(np.concatenate([[0.0]] + own)), trainable=False)
        self._discounted.orders = None  # in the tables now

    def backoff_weights(self, suffixes) -> tuple[tf.Tensor, tf.Tensor]:
        """The context's suffixes as contexts of orders 2..K: h (batch, K-1), column k-2 the id of the last k-1
        words (-1 when unseen), and γ(h) (batch, K-1), 1 where h is unseen."""
        h = tf.stack(suffixes[1:], axis=1)
        gamma = tf.stack(
            [
                tf.gather(read(self.ngram.backoffs[k - 2]), tf.maximum(h[:, k - 2], 0))
                for k in range(2, self.ngram.order + 1)
            ],
            axis=1,
        )
        return h, tf.where(h >= 0, gamma, tf.ones_like(gamma))

    def list_mass(self, context: tf.Tensor, suffixes=None) -> tf.Tensor:
        """m(C) = Σ_{j∈L} P_ng(j | C), (batch,) float64."""
        context = tf.cast(context, tf.int64)
        if self.ngram.order == 1:
            return tf.fill([tf.shape(context)[0]], self.base_mass)
        h, gamma = self.backoff_weights(suffixes if suffixes is not None else self.ngram.suffix_ids(context))
        return self.mass_from(h, gamma, tf.math.cumprod(gamma, axis=1, exclusive=True, reverse=True))

    def mass_from(self, h: tf.Tensor, gamma: tf.Tensor, longer: tf.Tensor) -> tf.Tensor:
        """m(C) = m(h_1)·Π_k γ_k + Σ_k Δ_k(h_k)·Π_{j>k} γ_j: the recursion m(h) = Δ(h) + γ(h)·m(h') unrolled,
        with `longer` = Π_{j>k} γ_j (batch, K-1); an unseen h has γ = 1 and Δ = 0."""
        delta = tf.stack(
            [tf.gather(read(self.deltas[k - 2]), tf.maximum(h[:, k - 2], 0)) for k in range(2, self.ngram.order + 1)],
            axis=1,
        )
        delta = tf.where(h >= 0, delta, tf.zeros_like(delta))
        return self.base_mass * longer[:, 0] * gamma[:, 0] + tf.reduce_sum(delta * longer, axis=1)

    def log_prob(self, logits: tf.Tensor, context: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
        """ln P(target | context), (batch,) float64, from the network's logits (batch, N [+ 1]): the head's own
        formula (`NgramTail.combine_log`, which the NumPy path calls too) over the graph's n-gram."""
        context, target = tf.cast(context, tf.int64), tf.cast(target, tf.int64)
        ln_nn = self.owner.network_log_prob_at(logits, self.owner.column_of(target))
        suffixes = self.ngram.suffix_ids(context)
        mass = self.list_mass(context, suffixes)
        ln_ng = tf.math.log(self.ngram.token_probabilities(context, target, suffixes))
        return self.owner.combine_log(ln_nn, ln_ng, mass, target < self.list_size)

    def distribution(self, logits: tf.Tensor, context: tf.Tensor) -> tf.Tensor:
        """P(· | context) over all |V| words, (batch, |V|) float64."""
        context = tf.cast(context, tf.int64)
        p_nn = self.owner.network_probs(logits)  # (batch, N [+ 1])
        p_ng = self.ngram.distribution(context)  # (batch, |V|)
        listed, scale = self.owner.list_and_tail_scale(p_nn, self.list_mass(context))
        return tf.concat([listed, p_ng[:, self.list_size :] * scale[:, None]], axis=1)

    def suffix_groups(self, context: tf.Tensor) -> tuple[tf.Tensor, ...]:
        """What `top_k` and `sample` read of the context's suffixes h_k (k = 2..K, column k-2): γ(h_k) and
        Λ_k = Π_{j>k} γ(h_j) (batch, K-1), m(C) (batch,), and where h_k's tail successors lie in the ranked
        tables, [lo, hi) (batch, K-1), empty for an unseen h_k (`rank_tail` must have run)."""
        h, gamma = self.backoff_weights(self.ngram.suffix_ids(context))
        longer = tf.math.cumprod(gamma, axis=1, exclusive=True, reverse=True)
        group = self.context_offsets[None, :] + tf.maximum(h, 0)  # rows of `starts`
        bounds = tf.gather(read(self.starts), tf.stack([group, group + 1], axis=2))  # (batch, K-1, 2)
        lo, hi = bounds[:, :, 0], tf.where(h >= 0, bounds[:, :, 1], bounds[:, :, 0])
        return gamma, longer, self.mass_from(h, gamma, longer), lo, hi

    def top_k(self, logits: tf.Tensor, context: tf.Tensor, k: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """The k most probable words over all |V| and their P: values (batch, k) float64, ids (batch, k) int64.

        `distribution` followed by a top-k (ties: the lower id first), without building the (batch, |V|)
        distribution; exact for every k ≤ |V| (`rank_tail` must have run). A tail word found after the
        context's suffix of order k (and no longer one) has P_ng = p_k(w | h_k) times the γ of the longer
        suffixes, and its value at any shorter suffix is at most that (interpolation only adds). So the
        tail's k best are among the k best of each suffix's tail successors (`ranked_*`) and the tail's k
        most probable unigrams, each valued at its own order and deduplicated by keeping the longest suffix's
        value: at most order · k candidates per context, whatever the context, found in the same few ops for
        every order.
        """
        context = tf.cast(context, tf.int64)
        n, ngram = self.list_size, self.ngram
        p_nn = self.owner.network_probs(logits)  # (batch, N [+ 1])
        rows = tf.shape(context)[0]
        slots = tf.range(tf.cast(k, self.starts.dtype))  # (k,) offsets, in the tables' type
        head = tf.minimum(slots, tf.size(self.head, out_type=slots.dtype) - 1)  # past the tail: its -1 end again
        head_words = tf.tile(tf.gather(read(self.head), head)[None, :], [rows, 1])  # (batch, k) word ids
        head_probs = tf.gather(read(self.head_probs), head)[None, :]
        if ngram.order == 1:
            listed, scale = self.owner.list_and_tail_scale(p_nn, tf.fill([rows], self.base_mass))
            words, values = head_words, head_probs * scale[:, None]
        else:
            gamma, longer, mass, lo, hi = self.suffix_groups(context)
            listed, scale = self.owner.list_and_tail_scale(p_nn, mass)
            factor = longer * scale[:, None]  # a tail word's P_ng at order k -> its P(w | C)
            where = lo[:, :, None] + slots  # (batch, K-1, k)
            last = tf.size(self.ranked_words, out_type=where.dtype) - 1
            where = tf.where(where < hi[:, :, None], where, last)  # past a group's end: the tables' -1 end
            found = tf.gather(read(self.ranked_words), where)
            p = tf.gather(read(self.ranked_probs), where) * factor[:, :, None]
            words = tf.concat([head_words, tf.reshape(found, [rows, -1])], axis=1)
            values = tf.concat([head_probs * (factor[:, 0] * gamma[:, 0])[:, None], tf.reshape(p, [rows, -1])], 1)
        # One entry per word: its longest suffix's, which is its exact value (the last of its entries, orders
        # being laid out in increasing order); after a stable sort by word, an entry followed by the same word
        # drops to -1, as do the tables' -1 ends.
        by_word = tf.argsort(words, axis=1, stable=True)
        words, values = tf.gather(words, by_word, batch_dims=1), tf.gather(values, by_word, batch_dims=1)
        repeated = tf.concat([words[:, :-1] == words[:, 1:], tf.zeros_like(words[:, :1], tf.bool)], axis=1)
        values = tf.where(repeated | (words < 0), tf.constant(-1.0, tf.float64), values)
        best = tf.math.top_k(listed, k=tf.minimum(k, n))
        top = tf.math.top_k(tf.concat([best.values, values], axis=1), k=k)
        ids = tf.concat([tf.cast(best.indices, words.dtype), words], axis=1)
        return top.values, tf.cast(tf.gather(ids, top.indices, batch_dims=1), tf.int64)

    def sample(self, logits: tf.Tensor, context: tf.Tensor, seed: tf.Tensor, banned=None, ban=True) -> tf.Tensor:
        """One word per row drawn from `distribution`, (batch,) int64, without building it (`rank_tail` must have run).

        The list side is the network's distribution q (with a tail output: its N + 1 outputs, the last
        standing for the tail; without: the list with probability m(C), else the tail). A tail word comes from the n-gram restricted
        to the tail, P_ng(w | C) / (1 - m(C)), taken apart along its interpolation: P_ng(w | C) = Σ_k Λ_k·p̃_k(w |
        h_k) + Λ_1·p_1(w), with Λ_k the γ of the suffixes longer than h_k (as `top_k` values them). A level is
        drawn in proportion to Λ_k times its tail mass in p̃, then a word by inverse CDF over that context's
        tail successors (`ranked_cumulative`) or the tail's unigrams (`head_cumulative`). `seed`: a stateless
        seed pair. `banned`: a list word never drawn while `ban` holds (the others keep their proportions).
        """
        context = tf.cast(context, tf.int64)
        n, ngram, seed = self.list_size, self.ngram, tf.cast(seed, tf.int64)
        rows = tf.shape(context)[0]
        split = [tf.random.experimental.stateless_fold_in(seed, j) for j in range(4)]
        uniform = [tf.random.stateless_uniform([rows], seed=s, dtype=tf.float64) for s in split[1:]]
        outputs = int(logits.shape[1])
        column = tf.range(outputs)
        shut = tf.zeros([outputs], tf.bool)
        if banned is not None:
            if not 0 <= banned < n:
                raise ValueError(f"only a list word can be banned from sampling; {banned} is not below N = {n}.")
            shut |= (column == banned) & tf.cast(ban, tf.bool)
        if self.owner.tail_output and n == self.vocab_size:
            shut |= column == n  # no tail word to stand for
        log_nn = tf.where(shut[None, :], tf.constant(-1e30, tf.float64), self.owner.network_log_probs(logits))
        pick = tf.random.stateless_categorical(log_nn, 1, seed=split[0])[:, 0]  # (batch,) an output
        if n == self.vocab_size:
            return pick  # every word is in the list

        head_cumulative = read(self.head_cumulative)
        # Each level's context: level 0 the unigrams (offsets into `head_cumulative`), level k-1 the suffix h_k
        # of order k (offsets into `ranked_cumulative`); its tail mass in p̃ and its weight Λ_k.
        start = end = tf.zeros([rows, 1], self.starts.dtype)
        below = tf.zeros([rows, 1], tf.float64)
        tau = tf.fill([rows, 1], head_cumulative[-1])
        share = tf.ones([rows, 1], tf.float64)
        mass = tf.fill([rows], self.base_mass)
        if ngram.order > 1:
            gamma, longer, mass, lo, hi = self.suffix_groups(context)
            cumulative = tf.gather(read(self.ranked_cumulative), tf.stack([lo, hi], axis=2))  # (batch, K-1, 2)
            start, end = tf.concat([start, lo], axis=1), tf.concat([end, hi], axis=1)
            below = tf.concat([below, cumulative[:, :, 0]], axis=1)
            tau = tf.concat([tau, cumulative[:, :, 1] - cumulative[:, :, 0]], axis=1)
            share = tf.concat([(longer[:, 0] * gamma[:, 0])[:, None], longer], axis=1)
        totals = tf.cumsum(share * tau, axis=1)  # (batch, K)
        level = tf.reduce_sum(tf.cast(totals <= (uniform[0] * totals[:, -1])[:, None], tf.int32), axis=1)
        level = tf.minimum(level, int(totals.shape[1]) - 1)
        chosen = lambda t: tf.gather(t, level, batch_dims=1)  # noqa: E731
        target = chosen(below) + uniform[1] * chosen(tau)
        unigram = tf.searchsorted(head_cumulative, target, side="right") - 1
        unigram = tf.gather(read(self.head), tf.clip_by_value(unigram, 0, tf.size(self.head) - 2))
        found = tf.searchsorted(read(self.ranked_cumulative), target, side="right", out_type=self.starts.dtype) - 1
        found = tf.maximum(tf.minimum(found, chosen(end) - 1), chosen(start))
        tail_word = tf.where(level == 0, unigram, tf.gather(read(self.ranked_words), tf.maximum(found, 0)))
        tail_word = tf.cast(tail_word, tf.int64)

        if self.owner.tail_output:
            return tf.where(pick == n, tail_word, pick)
        listed = mass * tf.reduce_sum(tf.exp(log_nn), axis=1)  # the list's probability, a banned word left out
        in_tail = uniform[2] * (listed + 1.0 - mass) >= listed
        return tf.where(in_tail, tail_word, pick)
