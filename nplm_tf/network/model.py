"""The Keras functional model of equation (1) and its loss, -ln P(target | context)."""

from __future__ import annotations

import keras
import tensorflow as tf

from nplm_tf.config import Config
from nplm_tf.network.layer import NPLMLayer
from nplm_tf.network.optimizers import make_optimizer


@tf.function(jit_compile=True, autograph=False)
def _xent_gradient(probabilities, targets, upstream):
    # d(-ln p_t)/dz = p - onehot(t), scaled by the upstream gradient: one XLA pass.
    onehot = tf.one_hot(targets, tf.shape(probabilities)[1], dtype=probabilities.dtype)
    return (probabilities - onehot) * upstream[:, None]


@tf.custom_gradient
def _softmax_nll(targets, logits):
    # TensorFlow's softmax kernel (oneDNN on x86) is one fast pass over the
    # (batch, |V|) logits; the loss is read off the target's probability and
    # the gradient p - onehot(t) costs one more pass. TensorFlow's fused
    # cross-entropy kernel and XLA's made several passes each, and took longer.
    probabilities = tf.nn.softmax(logits)
    p_target = tf.gather(probabilities, targets, axis=1, batch_dims=1)
    nll = tf.cond(
        tf.reduce_all(p_target > 1e-30),
        lambda: -tf.math.log(p_target),
        # A target probability near float32's underflow: exactly, from the logits.
        lambda: tf.reduce_logsumexp(logits, axis=1) - tf.gather(logits, targets, axis=1, batch_dims=1),
    )

    def gradient(upstream):
        return None, _xent_gradient(probabilities, targets, upstream)

    return nll, gradient


def token_nll(targets, logits):
    """-ln P(target | context) per example, from float32 logits (batch, |V|)."""
    return _softmax_nll(tf.cast(tf.reshape(targets, [-1]), tf.int32), tf.cast(logits, tf.float32))  # (batch,)


def log_softmax_at(logits, columns):
    """ln softmax(logits)[column] per row, (batch,): the column's logit minus the row's logsumexp, without the
    (batch, |V|) log_softmax (scoring needs one column of it). Core ops only: serving graphs use it."""
    return tf.gather(logits, columns, batch_dims=1) - tf.reduce_logsumexp(logits, axis=1)


@keras.saving.register_keras_serializable(package="nplm_tf")
class NegativeLogLikelihood(keras.losses.Loss):
    """Mean -ln P(target | context): the paper's training criterion before R(θ)."""

    def __init__(self, name="nll", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        return token_nll(y_true, y_pred)


@keras.saving.register_keras_serializable(package="nplm_tf")
class NPLMModel(keras.Model):
    """The functional model of equation (1), trained by its `objective` (`network.objectives`).

    The full softmax and the short list train with Keras's own step on the model's logits; a sampled objective
    never computes the full logits, so its step is its own (the same loss bookkeeping as Keras's). Without an
    objective (a model loaded for scoring) it is an ordinary functional model.

    A short-list model also carries its `tail` (`network.shortlist.ShortListTail`, set by `attach_tail`): the
    n-gram that completes its probabilities over the whole vocabulary. It is not a Keras or checkpoint
    dependency: the model directory keeps the n-gram in its own files.
    """

    objective = None
    tail = None

    def train_step(self, data):
        if self.objective is None or not self.objective.custom_step:
            return super().train_step(data)
        context, target = data
        with tf.GradientTape() as tape:
            nll, regularization = self.objective.losses(self, context, target)
            loss = tf.reduce_mean(nll) + regularization
            # Replicas' gradients are summed: each contributes its share of the global mean.
            scaled = loss / tf.distribute.get_replica_context().num_replicas_in_sync
        gradients = tape.gradient(scaled, self.trainable_weights)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_weights))
        self._loss_tracker.update_state(loss, sample_weight=tf.shape(target)[0])
        return {"loss": self._loss_tracker.result()}


def attach_tail(model: keras.Model, tail) -> keras.Model:
    """Gives a short-list model the n-gram tail its exact probabilities need (untracked by Keras and TF)."""
    object.__setattr__(model, "tail", tail)
    return model


def build_model(config: Config, vocab_size: int) -> keras.Model:
    """context ids (batch, n-1) -> logits (batch, |V|) (a short list's: (batch, N + 1), (batch, N), or with the
    network tail (batch, |V| + 1))."""
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
        output_size=config.output_size(vocab_size),
        output_rows=config.output_rows,
        dtype=config.precision,
        name="nplm",
    )(context)
    return NPLMModel(context, logits, name="nplm")


def compile_model(model: keras.Model, config: Config, steps_per_execution: int = 1, objective=None) -> keras.Model:
    """Compiles for training `objective` (default: the full softmax)."""
    from nplm_tf.network import objectives

    model.objective = objective or objectives.Softmax()
    # No compiled metrics: a training-time metric would compute the softmax a
    # second time each step; validation perplexity is computed exactly per epoch.
    model.compile(
        optimizer=make_optimizer(config),
        loss=model.objective.keras_loss(),
        steps_per_execution=steps_per_execution,
        jit_compile=config.jit_compile,
    )
    return model
