"""The output heads (`nplm_tf.network.heads`): one owner per output distribution, registered in one place."""

import glob
import re

import numpy as np
import pytest

from nplm_tf import engines
from nplm_tf.core import config as config_lib
from nplm_tf.network import heads
from tests import helpers

V, N = 30, 8


@pytest.mark.parametrize("name", ["softmax", *config_lib.TAILS])
def test_every_head_sizes_its_outputs_and_starts_from_the_unigram_model(name):
    """The flag's every tail has a head; its initial biases are one per output and, through its own
    distribution, give each list word its train frequency (so the head's outputs and biases agree)."""
    head = heads.named(name, N, V)
    counts = np.arange(V, 0, -1, dtype=np.float64) * 3
    bias = head.initial_bias(counts)
    assert bias.shape == (head.output_size(),) and bias.dtype == np.float32
    frequency = (counts + 1) / (counts + 1).sum()
    if name == "backoff":  # the list's own distribution
        frequency = frequency[:N] / frequency[:N].sum()
    elif name == "sigmoid":
        p = head.network_probs(bias[None, :], engines.NUMPY)[0]
        np.testing.assert_allclose(p[:N], frequency[:N], rtol=1e-5)
        np.testing.assert_allclose(p[N], frequency[N:].sum(), rtol=1e-5)
        return
    e = np.exp(bias.astype(np.float64))
    e /= e[: N + 1].sum() if name in ("class", "network") else e.sum()
    np.testing.assert_allclose(e[: min(N, len(e))], frequency[:N], rtol=1e-5)


def test_the_head_is_chosen_once_from_the_config_and_says_what_the_rest_needs():
    # the short list's tails that a Kneser-Ney n-gram scores are the heads that say so, and no list beside them
    assert heads.ngram_tails() == ("class", "backoff", "sigmoid")
    for name in config_lib.TAILS:
        config = config_lib.Config(shortlist=N, tail=name)
        head = heads.make(config, V)
        assert head.name == name and heads.kind(config) is type(head)
        assert head.needs_ngram == (name in heads.ngram_tails())
        assert not head.sampled and head.stores_rows == head.output_rows
        assert head.updates_lazily == head.lazy_updates
    full = heads.make(config_lib.Config(), V)
    assert full.name == "softmax" and not (full.sampled or full.stores_rows or full.updates_lazily)
    sampled = heads.make(config_lib.Config(loss="nce"), V)
    assert sampled.name == "softmax" and sampled.sampled and sampled.stores_rows and sampled.updates_lazily
    assert heads.make(config_lib.Config(classes=-1), V).stores_rows


def test_a_tail_option_its_head_does_not_take_is_refused_by_the_head():
    network = config_lib.Config(shortlist=N, tail="network", tail_ngram_order=2)
    with pytest.raises(config_lib.ConfigError, match=r"tail_ngram_order=2 needs an n-gram tail .*'network' has none"):
        heads.make(network, V)
    pruned = config_lib.Config(tail_ngram_prune="0,1")  # no short list: the full softmax has no tail
    with pytest.raises(config_lib.ConfigError, match="tail_ngram_prune='0,1' needs a short list with an n-gram tail"):
        heads.kind(pruned)
    assert heads.kind(pruned.replace(shortlist=N)).needs_ngram


def test_a_head_built_to_train_is_given_its_tail_n_gram_later():
    head = heads.make(config_lib.Config(shortlist=N), V)
    assert head.ngram is None
    marker = object()
    head.attach_ngram(marker)
    assert head.ngram is marker


def test_an_unknown_head_is_named_in_one_sentence():
    with pytest.raises(ValueError, match="no output head 'unigram'"):
        heads.named("unigram", N, V)


# Where the tail and the loss may be read: the head factory, the objective's, the configuration's validation, the flag
# checks and messages of the binaries and the tuner, which name them back to the user.
READERS = {
    "nplm_tf/network/heads/__init__.py",
    "nplm_tf/network/objectives.py",
    "nplm_tf/core/config.py",
    "nplm_tf/tools/train_flags.py",
    "nplm_tf/inference/nplm_format.py",
    "tuning/hypermodel.py",
    "tuning/search_flags.py",
    "tuning/search_lib.py",
}


def test_nothing_outside_the_factory_branches_on_the_tail_or_the_loss():
    """The output distribution has one owner: no module but those above reads `config.tail` or
    `config.loss`, and no model carries a head set behind Keras's back."""
    found = []
    for package in ("nplm_tf", "pipelines", "tuning"):
        for path in sorted(glob.glob(f"{package}/**/*.py", root_dir=helpers.ROOT, recursive=True)):
            with open(f"{helpers.ROOT}/{path}", encoding="utf-8") as f:
                text = f.read()
            if path not in READERS and re.search(r"\.(tail|loss)\b(?!_)", text):
                found.append(path)
            if "object.__setattr__(model" in text:
                found.append(f"{path} (object.__setattr__)")
    assert found == []


@pytest.mark.parametrize("name", ["softmax", "class", "backoff"])
def test_a_softmax_head_trains_on_the_loss_of_its_logits_with_the_bias_inside(name):
    # `training_losses` adds b inside the softmax's gradient pass; loss, R(θ) and every weight's gradient must
    # be those of `nll` on the layer's logits (Keras's path), a tail word's example included.
    import tensorflow as tf

    from nplm_tf.network.layer import NPLMLayer

    vocab, short = 9, 5
    head = heads.named(name, 0 if name == "softmax" else short, vocab)
    layer = NPLMLayer(vocab, 2, 3, 4, direct=True, weight_decay=0.1, output_size=head.output_size())
    layer.build((None, 2))
    rng = np.random.default_rng(0)
    for w in layer.weights:
        w.assign(rng.normal(size=w.shape).astype("float32"))
    context, target = tf.constant([[1, 2], [3, 8], [0, 0]]), tf.constant([3, 7, 0])  # 7: a tail word

    def run(fused):
        with tf.GradientTape() as tape:
            if fused:
                nll, penalty = head.training_losses(layer, context, target)
            else:
                nll = head.nll(target, layer(context, training=True))
                penalty = tf.add_n(layer.losses)
            total = tf.reduce_mean(nll) + penalty
        grads = tape.gradient(total, [w.value for w in layer.weights])
        return [nll.numpy(), float(penalty)] + [tf.convert_to_tensor(g).numpy() for g in grads]

    for fused, reference in zip(run(True), run(False), strict=True):
        np.testing.assert_allclose(fused, reference, rtol=1e-5, atol=1e-6)


def test_every_loss_a_model_compiles_is_registered_for_keras_to_reload():
    """model.keras holds the compiled loss by its registered name: the sampled objectives' and the heads'."""
    import keras

    from nplm_tf.network import objectives

    for loss in (objectives.NegativeLogLikelihood, objectives.HeadNLL):
        assert keras.saving.get_registered_object(keras.saving.get_registered_name(loss)) is loss
        assert keras.saving.get_registered_name(loss) == f"nplm_tf>{loss.__name__}"
