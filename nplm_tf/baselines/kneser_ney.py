"""Interpolated modified Kneser-Ney n-gram models, built the way KenLM's lmplz does.

Chen & Goodman (1998), with lmplz's conventions: each line is one sentence
with a single `<s>` in front and `</s>` at the end; the highest order uses raw
counts, lower orders use continuation ("adjusted") counts — the number of
distinct words seen to the left — except n-grams starting with `<s>`, which
keep raw counts; three discounts per order from counts of counts,

    Y = t1 / (t1 + 2 t2),  D1 = 1 - 2Y t2/t1,  D2 = 2 - 3Y t3/t2,  D3+ = 3 - 4Y t4/t3,

and interpolation down to the uniform distribution over the |V| predictable
types, so every distribution sums to one exactly:

    p(w | h) = (a(hw) - D(a(hw))) / S(h) + γ(h) p(w | h'),
    γ(h) = (D1 N1(h·) + D2 N2(h·) + D3+ N3+(h·)) / S(h).

Everything is numpy over arrays of n-gram ids: n-grams of order k are numbered
by `np.unique` of (id of the (k-1)-gram context) * B + word, position by
position, so no Python loop runs over tokens.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from nplm_tf.baselines import kn_prune
from nplm_tf.baselines.ngram_arrays import (
    FALLBACK_DISCOUNTS,
    NgramError,
    Order,
    TokenArrays,
    discounts_from,
    index_array,
    prune_thresholds,
)

__all__ = [
    "FALLBACK_DISCOUNTS",
    "KneserNey",
    "NgramError",
    "Order",
    "TokenArrays",
    "discounts_from",
    "index_array",
    "prune_thresholds",
]


class KneserNey:
    """An interpolated modified Kneser-Ney model of order `order` over ids 0 .. V-1.

    Args:
      train: the training split as `TokenArrays`.
      order: N, 1 to 5 (any N >= 1 works; 5 is KenLM's usual maximum here).
      vocab_size: |V|, the predictable types; id V is `<s>`.

    Example:
    >>> data = TokenArrays.from_lines([[2, 3, 2], [3, 2]], bos_id=4, eos_id=0)
    >>> model = KneserNey(data, order=2, vocab_size=4)
    >>> float(model.distribution([2]).sum())
    1.0
    """

    def __init__(
        self,
        train: TokenArrays | None,
        order: int,
        vocab_size: int,
        *,
        orders: list[Order | None] | None = None,
        warnings: list[str] | None = None,
        prune_thresholds: tuple[int, ...] | None = None,
    ):
        """The model counted and smoothed on `train`; or, with `train` None, the model whose tables are `orders`
        (index k: order k's `Order`, index 0 None), as `from_state` and an ARPA import give them."""
        if order < 1:
            raise NgramError(f"order={order} must be at least 1.")
        self.order = order
        self.vocab_size = vocab_size
        self.prune_thresholds = prune_thresholds or (0,) * order  # `prune`'s, one per order
        self.bos_id = vocab_size  # <s>, input only
        self.base = vocab_size + 1  # n-gram keys are context id * base + word
        self.warnings: list[str] = list(warnings or [])
        if train is None:
            if orders is None or len(orders) != order + 1:
                raise ValueError(f"a model of order {order} given by its tables needs {order} of them.")
            self.orders = orders
            return
        ids, self.orders = self._count(train)
        self._adjust(ids, train)
        self._probabilities()

    # ------------------------------------------------------------ building --

    def _count(self, data: TokenArrays):
        tokens, offset = data.tokens, data.offset
        ids = [None, tokens.copy()]  # ids[k][t]: id of the k-gram ending at t, -1 if none
        orders: list[Order | None] = [None]
        unigram_keys = np.arange(self.base, dtype=np.int64)
        orders.append(
            Order(
                unigram_keys,
                index_array(np.zeros(self.base, np.int64)),
                index_array(unigram_keys),
                index_array(np.full(self.base, -1, np.int64)),
                np.zeros(self.base),
                (0.0, 0.0, 0.0),
            )
        )
        for k in range(2, self.order + 1):
            valid = offset >= k - 1
            keys = np.full(tokens.size, -1, np.int64)
            prev = np.roll(ids[k - 1], 1)
            keys[valid] = prev[valid] * self.base + tokens[valid]
            unique, inverse = np.unique(keys[valid], return_inverse=True)
            if unique.size == 0:  # every lookup and table of an order assumes it holds n-grams
                raise NgramError(
                    f"no train line is long enough for an n-gram of order {k} ({k - 2} words between <s> and </s>); "
                    f"use an order of at most {k - 1}."
                )
            kid = np.full(tokens.size, -1, np.int64)
            kid[valid] = inverse
            first = np.zeros(unique.size, np.int64)
            first[inverse[::-1]] = np.flatnonzero(valid)[::-1]  # a position of each n-gram
            orders.append(
                Order(
                    unique,
                    index_array(unique // self.base),
                    index_array(unique % self.base),
                    index_array(ids[k - 1][first]),
                    np.zeros(unique.size),
                    (0.0, 0.0, 0.0),
                )
            )
            ids.append(kid)
        return ids, orders

    def _adjust(self, ids, data: TokenArrays):
        predicted = data.offset > 0
        for k in range(self.order, 0, -1):
            o = self.orders[k]
            valid = ids[k] >= 0
            if k == 1:
                valid &= predicted  # the lone <s> is never counted
            raw = np.bincount(ids[k][valid], minlength=o.keys.size).astype(np.float64)
            o.raw = raw
            if k == self.order:
                o.count = raw
            else:
                above = self.orders[k + 1]
                o.count = np.bincount(above.suffix, minlength=o.keys.size).astype(np.float64)
                starts_bos = self._first_word(k) == self.bos_id
                o.count[starts_bos] = raw[starts_bos]
            if k == 1:
                o.count[self.bos_id] = 0.0
            o.discounts, why = discounts_from(o.count[o.count > 0], k)
            if why:
                self.warnings.append(why)

    def _first_word(self, k: int) -> np.ndarray:
        """The first word of every k-gram, following context links down to order 1."""
        g = np.arange(self.orders[k].keys.size)
        for j in range(k, 1, -1):
            g = self.orders[j].context[g]
        return g

    def context_stats(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """p̃(w | h) = max(a(hw) - D, 0) / S(h) of every k-gram hw, and γ(h) of every (k-1)-gram h as a context of
        order k (1 where h is none)."""
        o, size = self.orders[k], self.orders[k - 1].keys.size
        d = o.discount(o.count)
        total = np.bincount(o.context, weights=o.count, minlength=size)
        mass = np.bincount(o.context, weights=d, minlength=size)
        gamma = np.divide(mass, total, out=np.ones(size), where=total > 0)
        return np.maximum(o.count - d, 0) / total[o.context], gamma

    def _probabilities(self):
        uni = self.orders[1]
        words = np.arange(self.base) != self.bos_id
        total = uni.count[words].sum()
        if total <= 0:
            raise NgramError("the training data has no tokens.")
        gamma0 = uni.discount(uni.count)[words].sum() / total
        uni.prob = np.maximum(uni.count - uni.discount(uni.count), 0) / total + gamma0 / self.vocab_size
        uni.prob[self.bos_id] = 0.0
        for k in range(2, self.order + 1):
            o, lower = self.orders[k], self.orders[k - 1]
            own, lower.backoff = self.context_stats(k)
            o.prob = own + lower.backoff[o.context] * lower.prob[o.suffix]
        self.orders[self.order].backoff = np.ones(self.orders[self.order].keys.size)

    # ------------------------------------------------------------- pruning --

    def prune(self, thresholds, name: str = "prune") -> None:
        """Drops the n-grams of order k ≥ 2 seen at most `thresholds[k-1]` times in train (raw counts; the last
        value holds for the orders after it, as lmplz's --prune reads it).

        Each pruned n-gram's discounted probability p̃(w | h) moves into γ(h), so that its word is backed off to
        as an unseen one is, and every kept p(w | h) = p̃(w | h) + γ(h) p(w | h') is recomputed with the new γ
        bottom-up: every distribution still sums to one exactly. Discounts and p̃ stay the unpruned model's; a
        context's train count (`context_totals`) keeps its pruned successors'. `name`: the setting an error
        names.
        """
        kn_prune.prune(self, thresholds, name)

    def context_totals(self) -> np.ndarray:
        """The train count of each (N-1)-gram as a context of order N (what the mixture's λ buckets read): the
        counts of the N-grams after it, pruned ones included; for N = 1, the count of all train tokens."""
        top = self.orders[self.order]
        if self.order == 1:
            return np.array([top.count[: self.vocab_size].sum()])
        lower = self.orders[self.order - 1]
        totals = np.bincount(top.context, weights=top.count, minlength=lower.keys.size)
        return totals + lower.pruned if lower.pruned is not None else totals

    # ------------------------------------------------------------ short list --

    # ------------------------------------------------------- serialization --

    def get_state(self) -> dict[str, np.ndarray]:
        """Everything the model holds, as named arrays (`from_state` rebuilds it): its settings, then every field
        of every `Order` (each named `k_field`)."""
        state = {
            "kind": np.array(type(self).__name__),
            "order": np.array(self.order),
            "vocab_size": np.array(self.vocab_size),
            "warnings": np.array(self.warnings, dtype=str),
            "prune": np.array(self.prune_thresholds, np.int64),
        }
        for k in range(1, self.order + 1):
            for field in dataclasses.fields(Order):
                value = getattr(self.orders[k], field.name)
                if value is not None:  # `pruned` is None in an unpruned model
                    state[f"{k}_{field.name}"] = np.asarray(value)
        return state

    @classmethod
    def from_state(cls, state) -> "KneserNey":
        order = int(state["order"])
        orders: list[Order | None] = [None]
        for k in range(1, order + 1):
            fields = {
                f.name: state[f"{k}_{f.name}"]
                for f in dataclasses.fields(Order)
                if f.default is dataclasses.MISSING or f"{k}_{f.name}" in state
            }
            fields["discounts"] = tuple(float(d) for d in fields["discounts"])
            orders.append(Order(**fields))
        return cls(
            None,
            order,
            int(state["vocab_size"]),
            orders=orders,
            warnings=[str(w) for w in state["warnings"]] if "warnings" in state else [],
            # files written before pruning have none
            prune_thresholds=tuple(int(t) for t in state["prune"]) if "prune" in state else None,
        )

    # ------------------------------------------------------------- queries --

    def distribution(self, context: list[int]) -> np.ndarray:
        """p(· | context) over the |V| predictable types; context oldest first."""
        context = list(context)[-(self.order - 1) :] if self.order > 1 else []
        if self.bos_id in context:
            context = context[len(context) - context[::-1].index(self.bos_id) - 1 :]
        probs = self.orders[1].prob[: self.vocab_size].copy()
        for k in range(2, len(context) + 2):
            h = self.context_id(context[-(k - 1) :])
            if h < 0:
                break
            o = self.orders[k]
            # β(h) applies to every word not listed after h, also when none is (an ARPA file may give a
            # context a back-off weight and no continuation, as KenLM's test file gives `<unk> <unk>`).
            probs = self.orders[k - 1].backoff[h] * probs
            lo, hi = np.searchsorted(o.keys, [h * self.base, (h + 1) * self.base])
            probs[o.word[lo:hi]] = o.prob[lo:hi]
        return probs

    def context_id(self, words: list[int]) -> int:
        """The id of the (len(words))-gram `words` (oldest first) in its order's table, −1 where it is absent."""
        g = words[0]
        for k, w in enumerate(words[1:], start=2):
            g = int(self.orders[k].lookup(np.array([g * self.base + w]))[0])
            if g < 0:
                return -1
        return g

    def extend_ids(self, ids: np.ndarray, data: TokenArrays, k: int) -> np.ndarray:
        """From the ids of the (k-1)-grams ending at each position, those of the k-grams (-1: absent)."""
        prev = np.roll(ids, 1)
        return self.orders[k].lookup(np.where((data.offset >= k - 1) & (prev >= 0), prev * self.base + data.tokens, -1))

    def token_probabilities(self, data: TokenArrays) -> np.ndarray:
        """p(w_t | up to N-1 previous words in its line) for every predicted position."""
        ids = data.tokens
        matched = self.orders[1].prob[ids]
        backoff_product = np.ones(ids.size)  # Π γ of contexts seen above the longest match
        for k in range(2, self.order + 1):
            context = np.where(data.offset >= k - 1, np.roll(ids, 1), -1)
            kid = self.extend_ids(ids, data, k)
            found = kid >= 0
            matched = np.where(found, self.orders[k].prob[np.maximum(kid, 0)], matched)
            backoff_product = np.where(found, 1.0, backoff_product)
            seen_context = ~found & (context >= 0)
            gamma = self.orders[k - 1].backoff[np.maximum(context, 0)]
            backoff_product = np.where(seen_context, backoff_product * gamma, backoff_product)
            ids = kid
        return (matched * backoff_product)[data.predicted]

    def context_counts(self, data: TokenArrays) -> np.ndarray:
        """Train count of each predicted token's (N-1)-word context (0 if unseen or cut by <s>)."""
        totals = self.context_totals()
        if self.order == 1:
            return np.full(int(data.predicted.sum()), float(totals[0]))
        ids = data.tokens
        for k in range(2, self.order):  # ids of the k-grams ending at each position
            ids = self.extend_ids(ids, data, k)
        context = np.where(data.offset >= self.order - 1, np.roll(ids, 1), -1)
        counts = np.where(context >= 0, totals[np.maximum(context, 0)], 0.0)
        return counts[data.predicted]
