"""A trained model read back: its Keras model and the tail a short list scores with.

The one place that turns a model directory into a model (`run_dir` only names and reads its files), and that
makes a short list's tail from its config (`tail_of`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from nplm_tf import run_dir as run_dir_lib
from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import kneser_ney as kn
from nplm_tf.config import Config, ConfigError
from nplm_tf.run_dir import RunDir

if TYPE_CHECKING:  # TensorFlow loads with the tail itself (`tail_of`)
    from nplm_tf.network.network_tail import NetworkTail
    from nplm_tf.network.shortlist import ShortListTail


def load_trained(model_dir: str, precision: str | None = None):
    """The (config, vocabulary, best-by-validation Keras model) of a training run (a short list's with its tail).

    `precision`: compute in this one instead of the run's (`config.PRECISIONS`; the weights are float32 in
    either, so the model is the same one, computed otherwise); the returned config says which."""
    from nplm_tf.network import model as model_lib  # Keras and TensorFlow only when a model is loaded

    run = run_dir_lib.check_trained(model_dir)
    config = run.read_config()
    if precision is not None:
        config = dataclasses.replace(config, precision=precision)  # checked as any config
    vocab = run.load_vocab()
    model = model_lib.build_model(config, vocab.size)
    run.load_best_weights(model)
    model_lib.attach_tail(model, load_tail(run, config))
    return config, vocab, model


def tail_of(config: Config, model: kn.KneserNey | None) -> ShortListTail | NetworkTail | None:
    """The tail a short-list model scores with (None without a short list): the network tail, or the n-gram
    tail of `model` (`keep_tail`'s). Loads TensorFlow."""
    if not config.shortlist:
        return None
    if not config.ngram_tail:
        from nplm_tf.network.network_tail import NetworkTail

        return NetworkTail(config.shortlist)
    from nplm_tf.network.shortlist import ShortListTail

    return ShortListTail(model, config.shortlist, config.tail)


def check_kneser_ney(model, where: str) -> None:
    if not isinstance(model, kn.KneserNey):
        raise ConfigError(
            f"the n-gram in {where} is not Kneser-Ney; a short list's tail needs one "
            "(nplm_tf.ngram --smoothing=kneser_ney)."
        )


def check_tail_model(model, config: Config, where: str) -> None:
    check_kneser_ney(model, where)
    if model.order != config.tail_order:
        remedy = (
            f"pass --tail_ngram_order={model.order} to use it"
            if model.order <= config.order
            else f"a tail n-gram's order is at most n = {config.order} (--order)"
        )
        raise ConfigError(
            f"the n-gram in {where} has order {model.order}, but the tail's is K = {config.tail_order} "
            f"(--tail_ngram_order; 0: min(4, n)); {remedy}."
        )


def load_tail_ngram(run: RunDir, config: Config) -> kn.KneserNey | None:
    """The n-gram of the tail a short-list run kept (None for a run without an n-gram tail)."""
    if not config.ngram_tail:
        return None
    tail_dir = run.tail_ngram_dir
    if not os.path.isfile(RunDir(tail_dir).ngram_model):
        raise ConfigError(
            f"{run.path} is a short-list model without its tail n-gram ({tail_dir}); "
            "run the training command again to rebuild it."
        )
    model = ngram_lib.load(tail_dir)
    check_tail_model(model, config, tail_dir)
    return model


def load_tail(run: RunDir, config: Config) -> ShortListTail | NetworkTail | None:
    """The tail a short-list run kept (None for a full-softmax run)."""
    return tail_of(config, load_tail_ngram(run, config))
