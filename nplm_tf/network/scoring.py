"""Exact perplexity: every predicted token, probabilities normalized over all |V| types."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import weakref
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from nplm_tf import engines
from nplm_tf.network import heads


@dataclasses.dataclass(frozen=True)
class Score:
    nll: float  # sum over tokens of -ln P, accumulated in float64
    tokens: int
    unk: int  # predicted tokens that are <unk>

    @property
    def perplexity(self) -> float:
        if not self.tokens:
            return float("nan")
        try:
            return math.exp(self.nll / self.tokens)
        except OverflowError:  # a mean past 709.78 nats (a diverged model): more than float64 holds
            return float("inf")

    @property
    def oov_rate(self) -> float:
        return self.unk / self.tokens if self.tokens else 0.0


_NLL_FUNCTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> (its head, its function)


def nll_function(model: keras.Model) -> Callable:
    """-ln P(target | context) of a batch of windows (contexts oldest first), exactly normalized over |V|
    by the model's head (`network.heads`: a short list's with its tail). One function per model (and head),
    traced once per batch shape: scoring the same model again (a notebook's loop) does not trace again.
    """
    head = model.head
    cached = _NLL_FUNCTIONS.get(model)
    if cached is not None and cached[0] is head:
        return cached[1]
    head.graph_state()  # its tables exist before the function is traced
    layer = model.get_layer("nplm")

    @tf.function(
        autograph=False, reduce_retracing=True
    )  # Python control flow only: AutoGraph's conversion cost seconds per process
    def batch_nll(context, target):
        outputs = heads.Outputs(layer.hidden(context), layer.output_logits)  # the rows the head asks for
        return -head.log_prob(outputs, context, target)  # (batch,) float64

    _NLL_FUNCTIONS[model] = (head, batch_nll)
    return batch_nll


def score(
    model: keras.Model,
    dataset: tf.data.Dataset,
    unk_id: int = 1,
    on_batch: Callable[[np.ndarray, np.ndarray], None] | None = None,
    batch_nll: Callable | None = None,
    progress: bool = False,
) -> Score:
    """Sums -ln P over `dataset`'s (context, target) batches, in order.

    `on_batch(targets, nll)` sees every batch (for per-token output). `progress`: a Keras progress bar of
    the batches on stderr, so that stdout keeps a binary's results (the dataset's cardinality as its end,
    when known).
    """
    batch_nll = batch_nll or nll_function(model)
    batches = int(dataset.cardinality())
    bar = keras.utils.Progbar(batches if batches >= 0 else None, unit_name="batch") if progress else None
    total, tokens, unk = 0.0, 0, 0
    for step, (context, target) in enumerate(dataset, 1):
        nll = batch_nll(context, target).numpy().astype(np.float64)
        targets = target.numpy()
        total += float(nll.sum())
        tokens += nll.size
        unk += int((targets == unk_id).sum())
        if on_batch is not None:
            on_batch(targets, nll)
        if bar is not None:
            with contextlib.redirect_stdout(sys.stderr):  # Keras draws it on stdout
                bar.update(step, finalize=step == batches)
    return Score(total, tokens, unk)


def token_probabilities(model: keras.Model, dataset: tf.data.Dataset, progress: bool = False) -> np.ndarray:
    """P(target | context) for every window of `dataset`, in order, as float64 (`progress` as in `score`)."""
    parts: list[np.ndarray] = []
    score(model, dataset, on_batch=lambda targets, nll: parts.append(nll), progress=progress)
    return np.exp(-np.concatenate(parts)) if parts else np.zeros(0)


def nll_and_log_z_function(model: keras.Model) -> Callable:
    """For a full softmax (the head that sampled objectives train): a batch's -ln P (as `nll_function`'s) and
    ln Z(context) = ln Σ_w exp(y_w), both from one forward pass, so that ln Z's statistics cost no pass of
    their own. Returns (nll, ln Z), each (batch,) float64."""
    head, layer = model.head, model.get_layer("nplm")

    @tf.function(autograph=False, reduce_retracing=True)
    def batch_nll_and_log_z(context, target):
        y = layer.output_logits(layer.hidden(context), 0, None)
        nll = -head.log_prob(heads.Outputs(logits=y), context, target)
        return nll, engines.TENSORFLOW.log_normalizer(y)

    return batch_nll_and_log_z
