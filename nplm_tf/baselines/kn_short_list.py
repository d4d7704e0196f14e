"""What a short list reads of a Kneser-Ney model (`network.heads.tail_tables`, `ngram_tail`): the list's mass in
every context, by a recursion that never touches the whole list (docs/large_vocabularies.md)."""

from __future__ import annotations

import numpy as np

from nplm_tf.baselines.ngram_arrays import TokenArrays


def short_list_tables(model, list_size: int) -> tuple[float, list[np.ndarray], list[np.ndarray]]:
    """What a short list of the ids 0..N-1 reads of `model` (a `KneserNey`), in one pass over each order.

    With p(w | h) = p̃(w | h) + γ(h) p(w | h') (p̃ = 0 for an unseen (h, w)), m(h) = Σ_{w<N} p(w | h) is
    Δ(h) + γ(h) m(h'), where Δ(h) = Σ over the list words seen after h of p̃(w | h): m never touches all of
    the list. Returns m() of the unigram; for each order k = 2..K, Δ over the (k-1)-grams as contexts (0
    where none of the list follows); and for each order k = 2..K, p̃ of its tail n-grams (word ≥ N) in key
    order, what tail words are drawn from.
    """
    base = float(model.orders[1].prob[:list_size].sum())
    deltas, tail = [], []
    for k in range(2, model.order + 1):
        o, lower = model.orders[k], model.orders[k - 1]
        own = o.prob - lower.backoff[o.context] * lower.prob[o.suffix]  # p̃(w | h) of each seen (h, w)
        listed = o.word < list_size
        deltas.append(np.bincount(o.context[listed], weights=own[listed], minlength=lower.keys.size))
        tail.append(own[~listed])
    return base, deltas, tail


def token_list_masses(model, data: TokenArrays, base: float, deltas: list[np.ndarray]) -> np.ndarray:
    """m(C) = Σ_{j<N} p(j | C) for every predicted position's context, from `short_list_tables(N)`'s `base`
    and `deltas`: the recursion m(h) = Δ(h) + γ(h)·m(h') from the unigram up through the context's suffixes
    (an unseen one has γ = 1, Δ = 0), as `shortlist.ShortListTail.list_mass` computes it in the graph."""
    ids = data.tokens
    mass = np.full(ids.size, base)
    for k in range(2, model.order + 1):
        context = np.where(data.offset >= k - 1, np.roll(ids, 1), -1)  # h_k: the (k-1)-gram before
        seen = context >= 0
        where = np.maximum(context, 0)
        gamma = np.where(seen, model.orders[k - 1].backoff[where], 1.0)
        mass = np.where(seen, deltas[k - 2][where], 0.0) + gamma * mass
        ids = model.extend_ids(ids, data, k)
    return mass[data.predicted]
