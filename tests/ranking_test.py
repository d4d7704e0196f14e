"""Each head's top k and sampling, one implementation run by both engines: NumPy ranks as TensorFlow does (the
same words, the same P within float32 rounding, 1e-5) and as its own distribution does, and draws in proportion to it."""

import numpy as np
import pytest
import tensorflow as tf

from nplm_tf import engines
from nplm_tf.baselines import kneser_ney as kn
from nplm_tf.baselines import suffixes
from nplm_tf.network import heads
from tests import helpers

V, ROWS = 30, 24
NUMPY = engines.NUMPY


def random_lines(seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, V, size=rng.integers(1, 15)).tolist() for _ in range(200)]


def random_ngram(order, prune=()):
    model = kn.KneserNey(kn.TokenArrays.from_lines(random_lines(3), V, 0), order, V)
    model.prune(prune)
    return model


# name -> (head name, list size, n-gram order, pruning); the n-gram tails at several orders, one pruned
HEADS = {
    "softmax": ("softmax", 0, None, ()),
    "classes": ("classes", 6, None, ()),
    "network": ("network", 12, None, ()),
    "class4": ("class", 6, 4, ()),
    "class1": ("class", 6, 1, ()),
    "class_all": ("class", V, 3, ()),
    "backoff2": ("backoff", 6, 2, ()),
    "sigmoid_pruned": ("sigmoid", 10, 4, (0, 1)),
}


def build(name):
    kind, size, order, prune = HEADS[name]
    return heads.named(kind, size, V, random_ngram(order, prune) if order else None)


def contexts_of(count=ROWS, width=4):
    """Random contexts (some at a line's start), then suffixes seen in the n-gram's text (long matches)."""
    rng = np.random.default_rng(5)
    contexts = rng.integers(0, V + 1, size=(count // 2, width))
    contexts[:3, : width - 1] = V
    seen = [line[i : i + width] for line in random_lines(3) for i in range(len(line) - width + 1)]
    return np.concatenate([contexts, np.array(seen[: count - count // 2])]).astype(np.int64)


def logits_of(head, rows=ROWS, scale=3.0, seed=1):
    return (np.random.default_rng(seed).standard_normal((rows, head.output_size())) * scale).astype(np.float32)


@pytest.mark.parametrize("name", HEADS)
def test_numpy_ranks_as_tensorflow_and_as_its_own_distribution(name):
    """The same words in the same order as the graph's top k for every k (ties to the lower id, also where
    many outputs are equal), and NumPy's own distribution's stable ranking; P equal to float32's rounding."""
    head = build(name)
    if head.needs_ngram:
        head.prepare_serving()
    context = contexts_of()
    for logits in (logits_of(head), np.round(logits_of(head) * 2) / 2):  # then with many ties
        p = head.distribution(logits, context, NUMPY)
        ranked = np.argsort(-p, axis=1, kind="stable")
        for k in (0, 1, 3, 7, V):
            values, ids = head.top_k(logits, context, k, NUMPY)
            graph_values, graph_ids = head.top_k(tf.constant(logits), tf.constant(context), tf.constant(k))
            assert values.shape == ids.shape == (ROWS, k) and ids.dtype == np.int64
            np.testing.assert_array_equal(ids, graph_ids.numpy())
            np.testing.assert_allclose(values, graph_values.numpy(), rtol=1e-5)
            np.testing.assert_array_equal(ids, ranked[:, :k])
            np.testing.assert_allclose(values, np.take_along_axis(p, ranked[:, :k], axis=1), rtol=1e-5)


@pytest.mark.parametrize("name", HEADS)
def test_numpy_draws_each_word_in_proportion_to_its_distribution(name):
    """Every word's frequency over 10,000 draws per context lies within 5 binomial standard errors of its
    P (renormalized without a banned word, which is never drawn); the same seed draws the same words, another
    seed others."""
    head, rows, draws = build(name), 6, 10_000
    context = contexts_of(rows)
    logits = logits_of(head, rows, scale=1.5)
    p = head.distribution(logits, context, NUMPY)
    every = np.repeat(np.arange(rows), draws)
    for banned in (None, 1):
        drawn = head.sample(logits[every], context[every], np.array([4, 2]), banned, True, NUMPY)
        assert drawn.dtype == np.int64 and drawn.shape == (rows * draws,)
        frequency = np.stack([np.bincount(r, minlength=V) for r in drawn.reshape(rows, draws)]) / draws
        expected = p if banned is None else np.where(np.arange(V) == banned, 0.0, p)
        if name == "class_all":  # the tail output stands for no word: never drawn
            expected = expected / expected.sum(axis=1, keepdims=True)
        expected = expected / expected.sum(axis=1, keepdims=True)
        helpers.assert_drawn_in_proportion(frequency, expected, draws, 5)
        again = head.sample(logits[every], context[every], np.array([4, 2]), banned, True, NUMPY)
        np.testing.assert_array_equal(again, drawn)
    other = head.sample(logits[every], context[every], np.array([4, 3]), None, True, NUMPY)
    assert (other != drawn).mean() > 0.2


def model_context(row):
    """A network context as `KneserNey.distribution` reads it: its words after the last `<s>` pad (id |V|),
    with `<s>` itself standing for the start of the line."""
    row = [int(w) for w in row]
    return [V] + row[len(row) - row[::-1].index(V) :] if V in row else row


def test_the_suffix_lookups_give_the_models_own_probabilities_in_numpy():
    """`SuffixLookup` in NumPy (as the tail reads it) gives the model's P(w | C) of every word, as the model's
    own `distribution` does, contexts at a line's start included, by target and as a distribution."""
    model = random_ngram(4, (0, 1))
    lookup = suffixes.NumpyKneserNey(model)
    context = contexts_of()
    expected = np.stack([model.distribution(model_context(row)) for row in context])
    np.testing.assert_allclose(lookup.distribution(context), expected, rtol=1e-12)
    for word in range(V):
        p = lookup.token_probabilities(context, np.full(ROWS, word))
        np.testing.assert_allclose(p, expected[:, word], rtol=1e-12)


@pytest.mark.parametrize("name", HEADS)
def test_numpy_scores_targets_as_tensorflow_and_as_its_distribution(name):
    """ln P of every word as a target: NumPy's `log_prob` equals the graph's and ln of its own distribution."""
    head = build(name)
    context, logits = contexts_of(), logits_of(build(name))
    every, target = np.repeat(np.arange(ROWS), V), np.tile(np.arange(V), ROWS)
    ln_p = head.log_prob(logits[every], context[every], target, NUMPY).reshape(ROWS, V)
    graph = head.log_prob(tf.constant(logits[every]), tf.constant(context[every]), tf.constant(target))
    np.testing.assert_allclose(np.exp(ln_p), np.exp(graph.numpy().reshape(ROWS, V)), rtol=1e-5)
    np.testing.assert_allclose(np.exp(ln_p), head.distribution(logits, context, NUMPY), rtol=1e-5)
    if name != "class_all":  # (a class tail listing every word leaves its tail output's share to none)
        np.testing.assert_allclose(np.exp(ln_p).sum(axis=1), 1.0, rtol=1e-5)


def test_the_numpy_engines_ranking_and_drawing_keep_their_rules():
    """top k: largest first, ties to the lower index, for a k small enough to partition and for a large one,
    with many ties at the k-th value; a column of probability 0 is never drawn."""
    values, ids = NUMPY.top_k(np.array([[1.0, 3.0, 3.0, 0.0, 3.0]]), 4)
    np.testing.assert_array_equal(ids, [[1, 2, 4, 0]])
    np.testing.assert_array_equal(values, [[3.0, 3.0, 3.0, 1.0]])
    x = np.random.default_rng(3).integers(0, 12, size=(40, 300)).astype(np.float32)  # about 25 of each value
    ranked = np.argsort(-x, axis=1, kind="stable")
    for k in (1, 5, 30, 37, 299, 300):
        values, ids = NUMPY.top_k(x, k)
        np.testing.assert_array_equal(ids, ranked[:, :k])
        np.testing.assert_array_equal(values, np.take_along_axis(x, ranked[:, :k], axis=1))
    with np.errstate(divide="ignore"):
        log_p = np.log(np.tile([0.5, 0.0, 0.5], (4000, 1)))
    drawn = NUMPY.categorical(log_p, NUMPY.fold_in(np.array([1, 2]), 0))
    assert set(drawn.tolist()) == {0, 2}
    assert abs((drawn == 0).mean() - 0.5) < 0.05
