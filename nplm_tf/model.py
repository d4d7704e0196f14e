"""The Keras functional model, its loss and optimizer."""

from __future__ import annotations

import keras
import tensorflow as tf

from nplm_tf.config import Config
from nplm_tf.nplm_layer import NPLMLayer


@tf.function(jit_compile=True)
def _xent_gradient(probabilities, targets, upstream):
    # d(-ln p_t)/dz = p - onehot(t), scaled by the upstream gradient: one XLA pass.
    onehot = tf.one_hot(targets, tf.shape(probabilities)[1], dtype=probabilities.dtype)
    return (probabilities - onehot) * upstream[:, None]


@tf.custom_gradient
def _softmax_nll(targets, logits):
    # TensorFlow's softmax kernel (oneDNN on x86) is one fast pass over the
    # (batch, |V|) logits; the loss is read off the target's probability and
    # the gradient p - onehot(t) costs one more pass. TensorFlow's fused
    # cross-entropy kernel took ~5x as long here, and XLA's ~2.5x.
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


@tf.function(jit_compile=True)
def _adam_update(variable, m, v, gradient, squared, alpha, beta_1, beta_2, epsilon):
    # Keras's Adam update, term for term; XLA runs it as one pass over the
    # variable instead of about a dozen separate elementwise kernels. The
    # variables come as resource handles (tensors), so one trace serves every
    # variable of a shape, in every optimizer of the process.
    def read(handle):
        return tf.raw_ops.ReadVariableOp(resource=handle, dtype=gradient.dtype)

    if squared is None:
        squared = tf.square(gradient)
    m_old, v_old = read(m), read(v)
    m_new = m_old + (gradient - m_old) * (1 - beta_1)
    v_new = v_old + (squared - v_old) * (1 - beta_2)
    tf.raw_ops.AssignVariableOp(resource=m, value=m_new)
    tf.raw_ops.AssignVariableOp(resource=v, value=v_new)
    tf.raw_ops.AssignSubVariableOp(resource=variable, value=m_new * alpha / (tf.sqrt(v_new) + epsilon))


@keras.saving.register_keras_serializable(package="nplm_tf")
class FusedAdam(keras.optimizers.Adam):
    """`keras.optimizers.Adam` with each variable's update compiled by XLA into one pass.

    Same arguments, state (momentums, velocities, iterations) and results (to
    float rounding) as Keras's Adam, whose update runs as separate kernels that
    each read and write the whole variable; for the output layer U (h·|V|
    floats) that memory traffic cost more than the layer's matmuls. Under a
    distribution strategy each replica's copy is updated the same way (inside
    `Strategy.extended.update` a mirrored variable's handle is that replica's).
    With `amsgrad`, Keras's own update runs.
    """

    def update_step(self, gradient, variable, learning_rate):
        if self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        step = tf.cast(self.iterations + 1, dtype)
        beta_1 = tf.cast(self.beta_1, dtype)
        beta_2 = tf.cast(self.beta_2, dtype)
        alpha = tf.cast(learning_rate, dtype) * tf.sqrt(1 - tf.pow(beta_2, step)) / (1 - tf.pow(beta_1, step))
        if isinstance(gradient, tf.IndexedSlices):
            # As Keras does: the rows of a word seen k times in the batch add k
            # gradients, and v adds their k squares (not the square of the sum).
            values = tf.cast(gradient.values, dtype)
            squared = tf.math.unsorted_segment_sum(tf.square(values), gradient.indices, tf.shape(variable)[0])
            gradient = tf.math.unsorted_segment_sum(values, gradient.indices, tf.shape(variable)[0])
        else:
            gradient, squared = tf.cast(gradient, dtype), None  # squared in the same XLA pass
        index = self._get_variable_index(variable)
        _adam_update(variable.handle, self._momentums[index].value.handle, self._velocities[index].value.handle,
                     gradient, squared, alpha, beta_1, beta_2, tf.cast(self.epsilon, dtype))


def make_optimizer(config: Config) -> keras.optimizers.Optimizer:
    if config.optimizer == "sgd":
        # Plain SGD (no momentum) keeps the update of C sparse.
        return keras.optimizers.SGD(learning_rate=learning_rate(config))
    return FusedAdam(learning_rate=learning_rate(config))


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
