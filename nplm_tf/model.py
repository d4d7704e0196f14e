"""The Keras functional model, its loss and optimizer."""

from __future__ import annotations

import keras
import tensorflow as tf

from nplm_tf.config import Config
from nplm_tf.nplm_layer import NPLMLayer


@tf.function(jit_compile=True)
def _fused_nll(targets, logits):
    # XLA fuses log-softmax and its gradient into a few passes over the
    # (batch, |V|) logits; TensorFlow's CPU kernel is about 4x slower here.
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(targets, tf.int32), logits=logits)


def token_nll(targets, logits):
    """-ln P(target | context) per example, from float32 logits (batch, |V|)."""
    return _fused_nll(tf.reshape(targets, [-1]), tf.cast(logits, tf.float32))  # (batch,)


@keras.saving.register_keras_serializable(package="nplm_tf")
class NegativeLogLikelihood(keras.losses.Loss):
    """Mean -ln P(target | context): the paper's training criterion before R(θ)."""

    def __init__(self, name="nll", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        return token_nll(y_true, y_pred)


def build_model(config: Config, vocab_size: int) -> keras.Model:
    """context ids (batch, n-1) -> logits (batch, |V|)."""
    context = keras.Input(shape=(config.context_size,), dtype="int32", name="context")
    logits = NPLMLayer(
        vocab_size=vocab_size,
        context_size=config.context_size,
        feature_dim=config.feature_dim,
        hidden_dim=config.hidden_dim,
        direct=config.direct,
        weight_decay=config.weight_decay,
        dropout=config.dropout,
        seed=config.seed,
        dtype=config.precision,
        name="nplm",
    )(context)
    return keras.Model(context, logits, name="nplm")


def learning_rate(config: Config) -> keras.optimizers.schedules.LearningRateSchedule:
    """The paper's ε_t = ε_0 / (1 + r·t), t counting optimizer steps."""
    return keras.optimizers.schedules.InverseTimeDecay(
        initial_learning_rate=config.learning_rate, decay_steps=1, decay_rate=config.lr_decay
    )


def make_optimizer(config: Config) -> keras.optimizers.Optimizer:
    if config.optimizer == "sgd":
        # Plain SGD (no momentum) keeps the update of C sparse.
        return keras.optimizers.SGD(learning_rate=learning_rate(config))
    return keras.optimizers.Adam(learning_rate=learning_rate(config))


def compile_model(model: keras.Model, config: Config, steps_per_execution: int = 1) -> keras.Model:
    # No compiled metrics: a training-time metric would compute the softmax a
    # second time each step; validation perplexity is computed exactly per epoch.
    model.compile(
        optimizer=make_optimizer(config),
        loss=NegativeLogLikelihood(),
        steps_per_execution=steps_per_execution,
        jit_compile=config.jit_compile,
    )
    return model
