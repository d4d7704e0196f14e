"""Pruning a Kneser-Ney model as lmplz's --prune does (`KneserNey.prune`), every distribution kept normalized."""

from __future__ import annotations

import numpy as np

from nplm_tf.baselines.ngram_arrays import NgramError, Order, index_array, prune_thresholds


def prune(model, thresholds, name: str = "prune") -> None:
    """`KneserNey.prune` on `model`, in place: the n-grams of order k ≥ 2 seen at most `thresholds[k-1]` times
    dropped, their discounted probability moved into the back-off weight γ of their context."""
    thresholds = prune_thresholds(thresholds, model.order, name)
    if not any(thresholds):
        return
    if any(model.prune_thresholds):
        raise NgramError("this n-gram model is pruned already; build it again to prune it otherwise.")
    # A k-gram's context and suffix were seen at least as often as it, and the thresholds never decrease:
    # a kept n-gram's context and suffix are kept, as the lookups and the recursion below need.
    keep = [None, np.ones(model.orders[1].keys.size, bool)]
    keep += [model.orders[k].raw > thresholds[k - 1] for k in range(2, model.order + 1)]
    emptied = [k for k in range(2, model.order + 1) if not keep[k].any()]
    if emptied:
        given = ",".join(str(t) for t in thresholds)
        raise NgramError(
            f"{name}={given} leaves no n-gram of order {emptied[0]} (none was seen more than "
            f"{thresholds[emptied[0] - 1]} times); prune less, or use an order of at most {emptied[0] - 1}."
        )
    own, gamma, pruned = [None, None], [None], [None]  # own[k] per k-gram; gamma, pruned[k-1] per context
    for k in range(2, model.order + 1):  # all on the unpruned model and its ids
        o = model.orders[k]
        p, g = model.context_stats(k)
        dropped = ~keep[k]
        own.append(p)
        gamma.append(g + np.bincount(o.context[dropped], weights=p[dropped], minlength=g.size))
        pruned.append(np.bincount(o.context[dropped], weights=o.count[dropped], minlength=g.size))
    new_id = np.arange(model.orders[1].keys.size)  # order k-1's new id of each old one (-1: pruned)
    for k in range(2, model.order + 1):
        o, lower, kept = model.orders[k], model.orders[k - 1], keep[k]
        lower.backoff, lower.pruned = gamma[k - 1][keep[k - 1]], pruned[k - 1][keep[k - 1]]
        context, suffix = new_id[o.context[kept]], new_id[o.suffix[kept]]
        model.orders[k] = Order(
            context.astype(np.int64) * model.base + o.word[kept],
            index_array(context),
            o.word[kept],
            index_array(suffix),
            o.count[kept],
            o.discounts,
            o.raw[kept],
            own[k][kept] + lower.backoff[context] * lower.prob[suffix],
        )
        new_id = np.cumsum(kept) - 1
    top = model.orders[model.order]
    top.backoff, top.pruned = np.ones(top.keys.size), np.zeros(top.keys.size)
    model.prune_thresholds = thresholds
