"""A short list's n-gram tail ranked and sampled without the whole distribution, written once for both engines.

With L the N most frequent words, T the rest, P_ng the tail's Kneser-Ney model and m(C) = Σ_{j∈L} P_ng(j | C),
a head whose network has a tail output (`ngram_tail`, `sigmoid`) gives P(i | C) = q(i | C) on L and
q(tail | C) · P_ng(i | C) / (1 − m(C)) on T, one without it (the back-off tail) q(i | C) · m(C) on L and
P_ng(i | C) on T (`tail_tables`, docs/large_vocabularies.md). `TailRanking` computes ln P of targets and that distribution, and finds its
top k and draws from it reading only the context's suffixes and the tail words seen after each, in either
engine (`nplm_tf.engines`): `tail_tables.ShortListTail` holds the tables as TensorFlow variables (evaluation, the
SavedModel), `NumpyTail` as arrays (the tools, `LanguageModel`). `ranked_tables` builds them, in NumPy, from
the model. This module imports no TensorFlow.
"""

from __future__ import annotations

import numpy as np

from nplm_tf import engines
from nplm_tf.baselines import kn_short_list, suffixes
from nplm_tf.baselines import kneser_ney as kn


def ranked_tables(model: kn.KneserNey, list_size: int, discounted: list[np.ndarray]) -> dict[str, np.ndarray]:
    """What `TailRanking`'s `top_k` and `sample` read of a Kneser-Ney model, the short list being ids 0..N-1;
    `discounted`: p̃ of each order's tail n-grams (`kn_short_list.short_list_tables`' third part, whose first two,
    m() of the unigram and the Δ, the holder keeps as `base_mass` and `deltas` for m(C)).

    The contexts of every order k ≥ 2 (the (k-1)-grams) are numbered one after another, order 2's first
    (`context_offsets`); `starts[g]` is where context g's tail successors begin in `ranked_words` /
    `ranked_probs` (CSR offsets, one per context plus one), sorted by p_k(w | h) within each. Order 1 ranks
    the whole tail by its unigram probability (`head`, `head_probs`). Each table ends with a word -1 of
    probability 0, so that it is never empty. What sampling reads: `ranked_cumulative[i]`, the sum of p̃ over
    the entries before i (so a context's tail mass in p̃ is the difference at its two offsets), and
    `head_cumulative`, the same over `head`'s unigram probabilities.
    """
    n = list_size
    unigram = model.orders[1].prob
    head = n + np.argsort(-unigram[n : model.vocab_size], kind="stable")
    offsets, starts, words, probs, own = [], [], [], [], []
    contexts = total = 0  # contexts and tail successors so far
    for k in range(2, model.order + 1):
        keys, prob = model.orders[k].keys, model.orders[k].prob
        context, word = np.divmod(keys, model.base)  # keys are context id * base + word
        rows = np.flatnonzero(word >= n)
        ranking = np.lexsort((-prob[rows], context[rows]))
        rows = rows[ranking]
        size = int(model.orders[k - 1].keys.size)  # order k's contexts are the (k-1)-grams
        offsets.append(contexts)
        starts.append(total + np.searchsorted(context[rows], np.arange(size)))
        contexts += size
        words.append(word[rows])
        probs.append(prob[rows])
        own.append(discounted[k - 2][ranking])
        total += rows.size
    starts.append(np.array([total]))
    return {
        "head": np.append(head, -1),
        "head_probs": np.append(unigram[head], 0.0),
        "head_cumulative": np.cumsum(np.append(0.0, unigram[head])),
        "context_offsets": np.array(offsets, np.int64),
        "starts": np.concatenate(starts).astype(np.int64),
        "ranked_words": np.concatenate(words + [[-1]]).astype(np.int64),
        "ranked_probs": np.concatenate(probs + [[0.0]]),
        "ranked_cumulative": np.cumsum(np.concatenate([[0.0]] + own)),
    }


class TailRanking:
    """What a holder of `ranked_tables` (each an attribute of that name) computes from them. It provides
    `engine`, `ngram` (a `suffixes.SuffixLookup` over the tail's model), `list_size`, `vocab_size` and `owner`
    (the head: its network's own distribution q over its outputs, and whether its last output is the tail)."""

    engine = engines.NUMPY

    def backoff_weights(self, suffix_ids):
        """The context's suffixes as contexts of orders 2..K: h (rows, K-1), column k-2 the id of the last k-1
        words (-1 when unseen), and γ(h) (rows, K-1), 1 where h is unseen."""
        e, order = self.engine, self.ngram.order
        h = e.stack(suffix_ids[1:], axis=1)
        gamma = e.stack(
            [e.gather(e.read(self.ngram.backoffs[k - 2]), e.maximum(h[:, k - 2], 0)) for k in range(2, order + 1)],
            axis=1,
        )
        return h, e.where(h >= 0, gamma, e.ones_like(gamma))

    def list_mass(self, context, suffix_ids=None):
        """m(C) = Σ_{j∈L} P_ng(j | C), (rows,) float64."""
        e = self.engine
        context = e.int64(context)
        if self.ngram.order == 1:
            return e.fill([e.rows(context)], self.base_mass, "float64")
        h, gamma = self.backoff_weights(suffix_ids if suffix_ids is not None else self.ngram.suffix_ids(context))
        return self.mass_from(h, gamma, e.cumprod_after(gamma))

    def mass_from(self, h, gamma, longer):
        """m(C) = m(h_1)·Π_k γ_k + Σ_k Δ_k(h_k)·Π_{j>k} γ_j: the recursion m(h) = Δ(h) + γ(h)·m(h') unrolled,
        with `longer` = Π_{j>k} γ_j (rows, K-1); an unseen h has γ = 1 and Δ = 0."""
        e = self.engine
        delta = e.stack(
            [e.gather(e.read(self.deltas[k - 2]), e.maximum(h[:, k - 2], 0)) for k in range(2, self.ngram.order + 1)],
            axis=1,
        )
        delta = e.where(h >= 0, delta, 0.0)
        return self.base_mass * longer[:, 0] * gamma[:, 0] + e.sum(delta * longer, axis=1)

    def log_prob(self, logits, context, target):
        """ln P(target | context), (rows,) float64, from the network's logits (rows, N [+ 1]): the head's own
        formula (`NgramTail.combine_log`) over the n-gram's P_ng(target | C) and m(C)."""
        e, owner = self.engine, self.owner
        context, target = e.int64(context), e.int64(target)
        ln_nn = owner.network_log_prob_at(logits, owner.column_of(target, e), e)
        suffix_ids = self.ngram.suffix_ids(context)
        mass = self.list_mass(context, suffix_ids)
        ln_ng = e.log(self.ngram.token_probabilities(context, target, suffix_ids))
        return owner.combine_log(ln_nn, ln_ng, mass, target < self.list_size, e)

    def distribution(self, logits, context):
        """P(· | context) over all |V| words, (rows, |V|) float64."""
        e = self.engine
        context = e.int64(context)
        p_nn = self.owner.network_probs(logits, e)  # (rows, N [+ 1])
        p_ng = self.ngram.distribution(context)  # (rows, |V|)
        listed, scale = self.owner.list_and_tail_scale(p_nn, self.list_mass(context), e)
        return e.concat([listed, p_ng[:, self.list_size :] * scale[:, None]], axis=1)

    def suffix_groups(self, context):
        """What `top_k` and `sample` read of the context's suffixes h_k (k = 2..K, column k-2): γ(h_k) and
        Λ_k = Π_{j>k} γ(h_j) (rows, K-1), m(C) (rows,), and where h_k's tail successors lie in the ranked
        tables, [lo, hi) (rows, K-1), empty for an unseen h_k."""
        e = self.engine
        h, gamma = self.backoff_weights(self.ngram.suffix_ids(context))
        longer = e.cumprod_after(gamma)
        group = e.read(self.context_offsets)[None, :] + e.maximum(h, 0)  # rows of `starts`
        bounds = e.gather(e.read(self.starts), e.stack([group, group + 1], axis=2))  # (rows, K-1, 2)
        lo, hi = bounds[:, :, 0], e.where(h >= 0, bounds[:, :, 1], bounds[:, :, 0])
        return gamma, longer, self.mass_from(h, gamma, longer), lo, hi

    def top_k(self, logits, context, k):
        """The k most probable words over all |V| and their P: values (rows, k) float64, ids (rows, k) int64.

        The distribution's top k (ties: the lower id first), without building the (rows, |V|) distribution;
        exact for every k ≤ |V|. A tail word found after the context's suffix of order k (and no longer one)
        has P_ng = p_k(w | h_k) times the γ of the longer suffixes, and its value at any shorter suffix is at
        most that (interpolation only adds). So the tail's k best are among the k best of each suffix's tail
        successors (`ranked_*`) and the tail's k most probable unigrams, each valued at its own order and
        deduplicated by keeping the longest suffix's value: at most order · k candidates per context, whatever
        the context, found in the same few operations for every order.
        """
        e, n, owner = self.engine, self.list_size, self.owner
        context = e.int64(context)
        p_nn = owner.network_probs(logits, e)  # (rows, N [+ 1])
        rows = e.rows(context)
        slots = e.arange(k, like=e.read(self.starts))  # (k,) offsets, in the tables' type
        head_ids = e.read(self.head)
        head = e.minimum(slots, e.size(head_ids) - 1)  # past the tail: its -1 end again
        head_words = e.tile(e.gather(head_ids, head)[None, :], [rows, 1])  # (rows, k) word ids
        head_probs = e.gather(e.read(self.head_probs), head)[None, :]
        if self.ngram.order == 1:
            listed, scale = owner.list_and_tail_scale(p_nn, e.fill([rows], self.base_mass, "float64"), e)
            words, values = head_words, head_probs * scale[:, None]
        else:
            gamma, longer, mass, lo, hi = self.suffix_groups(context)
            listed, scale = owner.list_and_tail_scale(p_nn, mass, e)
            factor = longer * scale[:, None]  # a tail word's P_ng at order k -> its P(w | C)
            ranked = e.read(self.ranked_words)
            where = lo[:, :, None] + slots  # (rows, K-1, k)
            where = e.where(where < hi[:, :, None], where, e.size(ranked) - 1)  # past a group: the -1 end
            found = e.gather(ranked, where)
            p = e.gather(e.read(self.ranked_probs), where) * factor[:, :, None]
            words = e.concat([head_words, e.reshape(found, [rows, -1])], axis=1)
            values = e.concat([head_probs * (factor[:, 0] * gamma[:, 0])[:, None], e.reshape(p, [rows, -1])], 1)
        # One entry per word: its longest suffix's, which is its exact value (the last of its entries, orders
        # being laid out in increasing order); after a stable sort by word, an entry followed by the same word
        # drops to -1, as do the tables' -1 ends.
        by_word = e.argsort(words)
        words, values = e.take_along_rows(words, by_word), e.take_along_rows(values, by_word)
        repeated = e.concat([words[:, :-1] == words[:, 1:], e.fill([rows, 1], False, "bool")], axis=1)
        values = e.where(~(repeated | (words < 0)), values, -1.0)
        best_values, best_ids = e.top_k(listed, e.minimum(k, n))
        top_values, top_ids = e.top_k(e.concat([best_values, values], axis=1), k)
        ids = e.concat([e.cast(best_ids, words.dtype), words], axis=1)
        return top_values, e.int64(e.take_along_rows(ids, top_ids))

    def sample(self, logits, context, seed, banned=None, ban=True):
        """One word per row drawn from the distribution, (rows,) int64, without building it.

        The list side is the network's distribution q (with a tail output: its N + 1 outputs, the last
        standing for the tail; without: the list with probability m(C), else the tail). A tail word comes from
        the n-gram restricted to the tail, P_ng(w | C) / (1 - m(C)), taken apart along its interpolation:
        P_ng(w | C) = Σ_k Λ_k·p̃_k(w | h_k) + Λ_1·p_1(w), with Λ_k the γ of the suffixes longer than h_k (as
        `top_k` values them). A level is drawn in proportion to Λ_k times its tail mass in p̃, then a word by
        inverse CDF over that context's tail successors (`ranked_cumulative`) or the tail's unigrams
        (`head_cumulative`). `seed`: a seed pair (the engine's stateless draws). `banned`: a list word never
        drawn while `ban` holds (the others keep their proportions).
        """
        e, n, owner = self.engine, self.list_size, self.owner
        context = e.int64(context)
        rows = e.rows(context)
        split = [e.fold_in(seed, j) for j in range(4)]
        uniform = [e.uniform(s, rows) for s in split[1:]]
        column = e.arange(int(logits.shape[1]))
        shut = column < 0
        if banned is not None:
            if not 0 <= banned < n:
                raise ValueError(f"only a list word can be banned from sampling; {banned} is not below N = {n}.")
            shut |= (column == banned) & e.as_bool(ban)
        if owner.tail_output and n == self.vocab_size:
            shut |= column == n  # no tail word to stand for
        log_nn = e.where(~shut[None, :], owner.network_log_probs(logits, e), -1e30)
        pick = e.categorical(log_nn, split[0])  # (rows,) an output
        if n == self.vocab_size:
            return pick  # every word is in the list

        starts, head_cumulative = e.read(self.starts), e.read(self.head_cumulative)
        # Each level's context: level 0 the unigrams (offsets into `head_cumulative`), level k-1 the suffix h_k
        # of order k (offsets into `ranked_cumulative`); its tail mass in p̃ and its weight Λ_k.
        start = end = e.fill([rows, 1], 0, starts.dtype)
        below = e.fill([rows, 1], 0.0, "float64")
        tau = e.ones_like(below) * head_cumulative[-1]
        share = e.ones_like(below)
        mass = e.fill([rows], self.base_mass, "float64")
        if self.ngram.order > 1:
            gamma, longer, mass, lo, hi = self.suffix_groups(context)
            cumulative = e.gather(e.read(self.ranked_cumulative), e.stack([lo, hi], axis=2))  # (rows, K-1, 2)
            start, end = e.concat([start, lo], axis=1), e.concat([end, hi], axis=1)
            below = e.concat([below, cumulative[:, :, 0]], axis=1)
            tau = e.concat([tau, cumulative[:, :, 1] - cumulative[:, :, 0]], axis=1)
            share = e.concat([(longer[:, 0] * gamma[:, 0])[:, None], longer], axis=1)
        totals = e.cumsum(share * tau, axis=1)  # (rows, K)
        level = e.sum(e.as_int(totals <= (uniform[0] * totals[:, -1])[:, None]), axis=1)
        level = e.minimum(level, int(totals.shape[1]) - 1)

        def chosen(t):  # each row's entry at its level
            return e.take_along_rows(t, level[:, None])[:, 0]

        target = chosen(below) + uniform[1] * chosen(tau)
        head_ids = e.read(self.head)
        unigram = e.searchsorted(head_cumulative, target, side="right") - 1
        unigram = e.gather(head_ids, e.clip(unigram, 0, e.size(head_ids) - 2))
        found = e.searchsorted(e.read(self.ranked_cumulative), target, side="right", like=starts) - 1
        found = e.maximum(e.minimum(found, chosen(end) - 1), chosen(start))
        tail_word = e.where(level == 0, unigram, e.gather(e.read(self.ranked_words), e.maximum(found, 0)))
        tail_word = e.int64(tail_word)

        if owner.tail_output:
            return e.where(pick == n, tail_word, pick)
        listed = mass * e.sum(e.exp(log_nn), axis=1)  # the list's probability, a banned word left out
        in_tail = uniform[2] * (listed + 1.0 - mass) >= listed
        return e.where(in_tail, tail_word, pick)


class NumpyTail(TailRanking):
    """A short list's n-gram tail in NumPy: `TailRanking` over `ranked_tables` and the model's own arrays (the
    list mass's tables at once, the ranked ones when first read: scoring reads none of them).

    Args:
      model: the tail's `KneserNey` model.
      list_size: N.
      head: the head (`ngram_tail.NgramTail`).
    """

    def __init__(self, model: kn.KneserNey, list_size: int, head):
        self.list_size, self.vocab_size, self.owner, self.model = int(list_size), model.vocab_size, head, model
        self.ngram = suffixes.NumpyKneserNey(model)
        self.base_mass, self.deltas, self.discounted = kn_short_list.short_list_tables(model, list_size)

    def __getattr__(self, name: str):  # only for attributes not yet set: the ranked tables
        if name in ("model", "ngram", "discounted") or name.startswith("__"):
            raise AttributeError(name)
        for table, values in ranked_tables(self.model, self.list_size, self.discounted).items():
            setattr(self, table, values)
        return object.__getattribute__(self, name)
