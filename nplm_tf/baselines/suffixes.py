"""A Kneser-Ney model's lookups by context, written once for both engines (`nplm_tf.engines`).

The n-grams of order k are stored as `kneser_ney.Order` stores them: sorted int64 keys `context id * B + word`,
where the context id is the row of the (k-1)-gram prefix in order k-1 (a trie spread over sorted arrays). A
lookup is a binary search over those keys (`searchsorted`): in TensorFlow core ops, so a SavedModel needs no
custom op and no Python (`ngram_graph.ServingKneserNey`, whose tables are variables); in NumPy over the model's
own arrays (`NumpyKneserNey`). Contexts are (rows, c) int64 ids, oldest first, `<s>`-padded; float64 throughout.
"""

from __future__ import annotations

from nplm_tf import engines

NONE = -1  # "absent": an n-gram id, or a query that cannot match


class SuffixLookup:
    """What a table holder provides: `engine`, `order`, `base` (B), `vocab_size` and `keys[k - 1]` (order k's
    sorted keys), and for Kneser-Ney's `token_probabilities` and `distribution` `probs[k - 1]` and
    `backoffs[k - 1]` (each order's p and γ, by n-gram id)."""

    engine = engines.NUMPY

    def lookup(self, k: int, query):
        """Row of each key in order k, -1 where absent or where the query is negative; any shape."""
        e = self.engine
        keys = e.read(self.keys[k - 1])
        flat = e.reshape(query, [-1])
        clipped = e.minimum(e.searchsorted(keys, flat), e.size(keys) - 1)
        found = (e.gather(keys, clipped) == flat) & (flat >= 0)
        return e.reshape(e.where(found, clipped, NONE), e.shape(query))

    def extend(self, k: int, prefix_ids, words):
        """Ids of the k-grams (prefix, word); -1 where the prefix or the k-gram is absent."""
        return self.lookup(k, self.engine.where(prefix_ids >= 0, prefix_ids * self.base + words, NONE))

    def suffix_ids(self, context) -> list:
        """context (T, c) ids, oldest first -> s[j] (T,): id of its last j words (j < order), -1 if unseen.

        The suffix of j words is found from its oldest word forwards, one order's table per word; all suffixes
        take their i-th step together, one lookup per order (not one per suffix and order).
        """
        e = self.engine
        c = context.shape[1]
        top = min(self.order - 1, c)
        s = [None]
        if top >= 1:
            chains = context[:, c - top :]  # column top - j: the suffix of j words, found up to its current length
            for i in range(2, top + 1):  # every suffix of at least i words takes its i-th word, in order i
                live = top - i + 1
                step = self.extend(i, chains[:, :live], context[:, c - top + i - 1 :])
                chains = e.concat([step, chains[:, live:]], axis=1)
            s += [chains[:, top - j] for j in range(1, top + 1)]
        while len(s) < self.order:  # a context shorter than order - 1 has no longer suffixes
            s.append(-e.ones_like(context[:, 0]))
        return s

    def token_probabilities(self, context, target, suffixes=None):
        """p(target | context), (T,) float64 (`suffixes`: the context's `suffix_ids`)."""
        e = self.engine
        s = suffixes if suffixes is not None else self.suffix_ids(context)
        p = e.gather(e.read(self.probs[0]), target)
        backoff = e.ones_like(p)
        for k in range(2, self.order + 1):
            h = s[k - 1]
            kid = self.extend(k, h, target)
            found = kid >= 0
            p = e.where(found, e.gather(e.read(self.probs[k - 1]), e.maximum(kid, 0)), p)
            gamma = e.gather(e.read(self.backoffs[k - 2]), e.maximum(h, 0))
            backoff = e.where(found, e.ones_like(backoff), e.where(h >= 0, backoff * gamma, backoff))
        return p * backoff

    def continuations(self, k: int, h, values, base):
        """`base` (rows, |V|) with the entries of each row's context h's continuations in order k set from
        `values` (by n-gram id)."""
        e = self.engine
        keys = e.read(self.keys[k - 1])
        lo = e.searchsorted(keys, h * self.base)
        hi = e.where(h >= 0, e.searchsorted(keys, (h + 1) * self.base), lo)
        rows, index = e.ragged_range(lo, hi)  # each row's continuations, one after another
        words = e.floormod(e.gather(keys, index), self.base)
        return e.scatter_2d(base, rows, words, e.gather(e.read(values), index))

    def distribution(self, context):
        """p(· | context) over the |V| types, (rows, |V|) float64."""
        e = self.engine
        s = self.suffix_ids(context)
        probs = e.tile(e.read(self.probs[0])[None, : self.vocab_size], [e.rows(context), 1])
        for k in range(2, self.order + 1):
            h = s[k - 1]
            # A listed context's β applies also when no n-gram follows it (an ARPA file may list one so).
            gamma = e.where(h >= 0, e.gather(e.read(self.backoffs[k - 2]), e.maximum(h, 0)), 1.0)
            probs = self.continuations(k, h, self.probs[k - 1], probs * gamma[:, None])
        return probs


class NumpyKneserNey(SuffixLookup):
    """A `kneser_ney.KneserNey` model's tables as `SuffixLookup` reads them in NumPy (views, no copies)."""

    def __init__(self, model):
        self.order, self.base, self.vocab_size = model.order, model.base, model.vocab_size
        orders = [model.orders[k] for k in range(1, model.order + 1)]
        self.keys = [o.keys for o in orders]
        self.probs = [o.prob for o in orders]
        self.backoffs = [o.backoff for o in orders]
