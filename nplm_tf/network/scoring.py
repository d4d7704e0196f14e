"""Exact perplexity: every predicted token, probabilities normalized over all |V| types."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from nplm_tf.network import model as model_lib


@dataclasses.dataclass(frozen=True)
class Score:
    nll: float  # sum over tokens of -ln P, accumulated in float64
    tokens: int
    unk: int  # predicted tokens that are <unk>

    @property
    def perplexity(self) -> float:
        return math.exp(self.nll / self.tokens) if self.tokens else float("nan")

    @property
    def oov_rate(self) -> float:
        return self.unk / self.tokens if self.tokens else 0.0


def nll_function(model: keras.Model) -> Callable:
    @tf.function
    def batch_nll(context, target):
        return model_lib.token_nll(target, model(context, training=False))  # (batch,)

    return batch_nll


def score(
    model: keras.Model,
    dataset: tf.data.Dataset,
    unk_id: int = 1,
    on_batch: Callable[[np.ndarray, np.ndarray], None] | None = None,
    batch_nll: Callable | None = None,
) -> Score:
    """Sums -ln P over `dataset`'s (context, target) batches, in order.

    `on_batch(targets, nll)` sees every batch (for per-token output).
    """
    batch_nll = batch_nll or nll_function(model)
    total, tokens, unk = 0.0, 0, 0
    for context, target in dataset:
        nll = batch_nll(context, target).numpy().astype(np.float64)
        targets = target.numpy()
        total += float(nll.sum())
        tokens += nll.size
        unk += int((targets == unk_id).sum())
        if on_batch is not None:
            on_batch(targets, nll)
    return Score(total, tokens, unk)


def token_probabilities(model: keras.Model, dataset: tf.data.Dataset) -> np.ndarray:
    """P(target | context) for every window of `dataset`, in order, as float64."""
    parts: list[np.ndarray] = []
    score(model, dataset, on_batch=lambda targets, nll: parts.append(nll))
    return np.exp(-np.concatenate(parts)) if parts else np.zeros(0)
