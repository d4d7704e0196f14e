"""The optimizers: the paper's SGD schedule, and Adam with one kernel per variable."""

from __future__ import annotations

import keras
import tensorflow as tf

from nplm_tf.core.config import Config
from nplm_tf.network import heads


def learning_rate(config: Config) -> keras.optimizers.schedules.LearningRateSchedule:
    """The paper's ε_t = ε_0 / (1 + r·t), t counting optimizer steps."""
    return keras.optimizers.schedules.InverseTimeDecay(
        initial_learning_rate=config.learning_rate, decay_steps=1, decay_rate=config.lr_decay
    )


@tf.function(jit_compile=True, autograph=False)
def _adam_update(variable, m, v, gradient, squared, alpha, beta_1, beta_2, epsilon):
    # Keras's Adam update, term for term, from a sparse gradient's sums of rows
    # and of their squares; XLA runs it as a few passes instead of about a dozen
    # separate kernels. The variables come as resource handles (tensors), so
    # one trace serves every variable of a shape, in every optimizer.
    def read(handle):
        return tf.raw_ops.ReadVariableOp(resource=handle, dtype=gradient.dtype)

    m_old, v_old = read(m), read(v)
    m_new = m_old + (gradient - m_old) * (1 - beta_1)
    v_new = v_old + (squared - v_old) * (1 - beta_2)
    tf.raw_ops.AssignVariableOp(resource=m, value=m_new)
    tf.raw_ops.AssignVariableOp(resource=v, value=v_new)
    tf.raw_ops.AssignSubVariableOp(resource=variable, value=m_new * alpha / (tf.sqrt(v_new) + epsilon))


@keras.saving.register_keras_serializable(package="nplm_tf")
class FusedAdam(keras.optimizers.Adam):
    """`keras.optimizers.Adam` with each variable's update in one pass: TensorFlow's own Adam kernel for a dense
    gradient, and for a sparse one (C's) too, after a small correction of v on the batch's rows
    (`_sparse_adam_update`; with β₂ = 0, which it cannot correct, an XLA-compiled update).

    Same arguments, state (momentums, velocities, iterations) and results (to
    float rounding) as Keras's Adam, whose update runs as separate kernels that
    each read and write the whole variable; for the output layer U (h·|V|
    floats) that memory traffic cost more than the layer's matmuls. Under a
    distribution strategy each replica's copy is updated the same way (inside
    `Strategy.extended.update` a mirrored variable's handle is that replica's).
    With `amsgrad`, Keras's own update runs.

    With `lazy=True`, a sparse gradient (C's rows in the batch; a sampled
    objective's output rows) updates only its rows and their moments, as
    TensorFlow Addons' LazyAdam does: the rows the batch did not touch keep
    their moments instead of decaying them. Every step then costs the batch's
    rows, not |V| of them, which large vocabularies need.
    """

    def __init__(self, *args, lazy=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = bool(lazy)

    def get_config(self):
        return {**super().get_config(), "lazy": self.lazy}

    def update_step(self, gradient, variable, learning_rate):
        if self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        epsilon = tf.cast(self.epsilon, dtype)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index].value, self._velocities[index].value
        if not isinstance(gradient, tf.IndexedSlices):
            return _apply_adam(variable, m, v, tf.cast(gradient, dtype), learning_rate, step, beta_1, beta_2, epsilon)
        if not self.lazy and isinstance(self.beta_2, (int, float)) and self.beta_2 > 0:
            return _sparse_adam_update(variable, m, v, gradient, learning_rate, step, beta_1, beta_2, epsilon)
        alpha = tf.cast(learning_rate, dtype) * tf.sqrt(1 - tf.pow(beta_2, step)) / (1 - tf.pow(beta_1, step))
        if self.lazy:
            return _lazy_adam_update(variable, m, v, gradient, alpha, beta_1, beta_2, epsilon)
        # As Keras does: the rows of a word seen k times in the batch add k gradients, and v adds their k
        # squares (not the square of the sum); both sums from one segment sum of the values beside their squares.
        values = tf.cast(gradient.values, dtype)
        values = tf.reshape(values, [tf.shape(values)[0], -1])  # (k, the rest of the variable's shape)
        sums = tf.math.unsorted_segment_sum(
            tf.concat([values, tf.square(values)], axis=1), gradient.indices, tf.shape(variable)[0]
        )
        columns = tf.shape(values)[1]
        # Split here, not inside the compiled update, whose trace is keyed by its inputs' shapes: variable-shaped
        # inputs keep a trace from serving another shape's variables (a search builds models of several).
        summed, squared = (tf.reshape(part, tf.shape(variable)) for part in (sums[:, :columns], sums[:, columns:]))
        _adam_update(variable.handle, m.handle, v.handle, summed, squared, alpha, beta_1, beta_2, epsilon)


def _row_sums(gradient: tf.IndexedSlices, dtype):
    """(the distinct rows of a sparse gradient, the sum of each one's gradients, the sum of their squares)."""
    rows, position = tf.unique(gradient.indices)
    values = tf.cast(gradient.values, dtype)
    count = tf.shape(rows)[0]
    summed = tf.math.unsorted_segment_sum(values, position, count)
    return rows, summed, tf.math.unsorted_segment_sum(tf.square(values), position, count)


def _sparse_adam_update(variable, m, v, gradient: tf.IndexedSlices, learning_rate, step, beta_1, beta_2, epsilon):
    """Keras's Adam on every row from a sparse gradient (C's), through TensorFlow's dense Adam kernel.

    As Keras does, the rows of a word seen k times in the batch add k gradients G, and v adds their k squares S,
    not G². The kernel adds (1 − β₂)·G², so the rows the batch touched first get (1 − β₂)/β₂·(S − G²) added to v:
    β₂·that + (1 − β₂)·G² is Keras's (1 − β₂)·S. This is a few small operations on the batch's rows beside the
    kernel's one pass over the variable; the segment sum of G and S over all |V| rows, their split and an XLA
    update took about twice as long (`benchmarks.optimizer`).
    """
    rows, summed, squared = _row_sums(gradient, variable.dtype)
    tf.raw_ops.ResourceScatterAdd(
        resource=v.handle, indices=rows, updates=(squared - tf.square(summed)) * ((1 - beta_2) / beta_2)
    )
    dense = tf.scatter_nd(rows[:, None], summed, tf.shape(variable, out_type=rows.dtype))
    _apply_adam(variable, m, v, dense, learning_rate, step, beta_1, beta_2, epsilon)


def _apply_adam(variable, m, v, gradient, learning_rate, step, beta_1, beta_2, epsilon):
    """TensorFlow's own Adam kernel on a dense gradient: Keras's update (its lr·√(1 − β₂ᵗ)/(1 − β₁ᵗ) is Keras's
    α), the moments and the variable in one pass over blocks of the variable (`benchmarks.optimizer`)."""
    tf.raw_ops.ResourceApplyAdam(
        var=variable.handle,
        m=m.handle,
        v=v.handle,
        beta1_power=tf.pow(beta_1, step),
        beta2_power=tf.pow(beta_2, step),
        lr=tf.cast(learning_rate, variable.dtype),
        beta1=beta_1,
        beta2=beta_2,
        epsilon=epsilon,
        grad=gradient,
    )


def _lazy_adam_update(variable, m, v, gradient: tf.IndexedSlices, alpha, beta_1, beta_2, epsilon):
    """Adam on the rows of a sparse gradient only (repeated rows summed, their squares summed, as Keras does)."""
    rows, grad, squared = _row_sums(gradient, variable.dtype)
    m_new = tf.gather(m, rows) * beta_1 + grad * (1 - beta_1)
    v_new = tf.gather(v, rows) * beta_2 + squared * (1 - beta_2)
    tf.raw_ops.ResourceScatterUpdate(resource=m.handle, indices=rows, updates=m_new)
    tf.raw_ops.ResourceScatterUpdate(resource=v.handle, indices=rows, updates=v_new)
    tf.raw_ops.ResourceScatterSub(
        resource=variable.handle, indices=rows, updates=m_new * alpha / (tf.sqrt(v_new) + epsilon)
    )


def make_optimizer(config: Config, head: heads.Head) -> keras.optimizers.Optimizer:
    # --average: Keras's moving average of the weights, kept with the optimizer's state (so in every backup);
    # `training.callbacks.averaged_weights` puts it in the model to validate and keep.
    average = {"use_ema": True, "ema_momentum": config.average} if config.average > 0 else {}
    if config.optimizer == "sgd":
        # Plain SGD (no momentum) keeps the update of C sparse.
        return keras.optimizers.SGD(learning_rate=learning_rate(config), **average)
    # Large-vocabulary modes update only the rows a batch uses (see FusedAdam's `lazy`); not the network tail,
    # whose output layer is updated whole anyway and which aims at the full softmax's results (lazy updates
    # cost it validation perplexity: `benchmarks.large_vocab`).
    return FusedAdam(learning_rate=learning_rate(config), lazy=head.updates_lazily, **average)
