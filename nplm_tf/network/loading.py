"""A trained model read back: its Keras model, with the output head it scores with (`network.heads`).

The one place that turns a model directory into a model (`run_dir` only names and reads its files), and that
reads a short list's tail n-gram back.
"""

from __future__ import annotations

import dataclasses
import os

from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import kneser_ney as kn
from nplm_tf.core import run_dir as run_dir_lib
from nplm_tf.core.config import Config, ConfigError
from nplm_tf.core.run_dir import RunDir
from nplm_tf.network import heads

SCORING_PRECISION = "float32"  # every path that scores computes in it, whatever precision trained the model


def load_trained(model_dir: str, precision: str | None = None, head: heads.Head | None = None):
    """The (config, vocabulary, best-by-validation Keras model) of a training run, its `head` with a short
    list's tail n-gram (`head`: the one the caller holds for this run, else `load_head`'s).

    The model computes in float32 (`SCORING_PRECISION`), whatever precision trained it: bfloat16 is a training
    choice, and every path that scores (evaluate, the SavedModel, NumPy) then gives one model one number.
    `precision`: compute in this one instead (`config.PRECISIONS`; the weights are float32 in either, so the
    model is the same one, computed otherwise); the returned config says which."""
    from nplm_tf.network import model as model_lib  # Keras and TensorFlow only when a model is loaded

    run = run_dir_lib.check_trained(model_dir)
    config = dataclasses.replace(run.read_config(), precision=precision or SCORING_PRECISION)  # checked as any
    vocab = run.load_vocab()
    model = model_lib.build_model(config, head or load_head(run, config, vocab.size))
    run.load_best_weights(model)
    return config, vocab, model


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


def load_head(run: RunDir, config: Config, vocab_size: int) -> heads.Head:
    """The output head of a trained run (`heads.make`), with the tail n-gram it kept where it has one: built
    once where a model is loaded, and handed to what scores with it."""
    head = heads.make(config, vocab_size)
    if head.needs_ngram:
        head.attach_ngram(load_tail_ngram(run, config))
    return head


def load_tail_ngram(run: RunDir, config: Config) -> kn.KneserNey:
    """The n-gram of the tail a short-list run kept (its head `needs_ngram`)."""
    tail_dir = run.tail_ngram_dir
    if not os.path.isfile(RunDir(tail_dir).ngram_model):
        raise ConfigError(
            f"{run.path} is a short-list model without its tail n-gram ({tail_dir}); "
            "run the training command again to rebuild it."
        )
    model = ngram_lib.load(tail_dir)
    check_tail_model(model, config, tail_dir)
    return model
