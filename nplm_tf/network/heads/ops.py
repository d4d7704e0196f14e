"""The TensorFlow operations the heads share: the softmax's −ln P with its one-pass gradient, one column of a
log-softmax, and a matrix split in two with the decay of both in one gradient pass."""

from __future__ import annotations

import tensorflow as tf


@tf.function(jit_compile=True, autograph=False)
def biased_logits(y, bias):
    """float32(y) + b, (batch, outputs), of logits y before their bias in any float dtype: one XLA pass instead
    of a cast and an add."""
    return tf.cast(y, tf.float32) + bias


@tf.function(jit_compile=True, autograph=False)
def _xent_gradient(probabilities, targets, upstream, dtype=tf.float32):
    # d(-ln p_t)/dz = p - onehot(t), scaled by the upstream gradient, in `dtype`: one XLA pass.
    onehot = tf.one_hot(targets, tf.shape(probabilities)[1], dtype=probabilities.dtype)
    return tf.cast((probabilities - onehot) * upstream[:, None], dtype)


def _nll(probabilities, logits, targets):
    """-ln P(target) from the softmax's probabilities; a target probability near float32's underflow exactly,
    from the logits."""
    p_target = tf.gather(probabilities, targets, axis=1, batch_dims=1)
    return tf.cond(
        tf.reduce_all(p_target > 1e-30),
        lambda: -tf.math.log(p_target),
        lambda: tf.reduce_logsumexp(logits, axis=1) - tf.gather(logits, targets, axis=1, batch_dims=1),
    )


@tf.custom_gradient
def _softmax_nll(targets, logits):
    # TensorFlow's softmax kernel (oneDNN on x86) is one fast pass over the
    # (batch, |V|) logits; the loss is read off the target's probability and
    # the gradient p - onehot(t) costs one more pass. TensorFlow's fused
    # cross-entropy kernel and XLA's made several passes each, and took longer.
    probabilities = tf.nn.softmax(logits)

    def gradient(upstream):
        return None, _xent_gradient(probabilities, targets, upstream)

    return _nll(probabilities, logits, targets), gradient


@tf.custom_gradient
def _biased_softmax_nll(targets, y, bias):
    # As `_softmax_nll` of biased_logits(y, b), its two gradients from the probabilities: y's in y's dtype,
    # cast in the pass that forms it (not in a pass of its own over the float32 block), and b's,
    # Σ_i u_i (p_i − onehot(t_i)), as pᵀu (one pass over p) less the upstream at the targets.
    logits = biased_logits(y, bias)
    probabilities = tf.nn.softmax(logits)

    def gradient(upstream):
        d_y = _xent_gradient(probabilities, targets, upstream, y.dtype)
        d_bias = tf.linalg.matvec(probabilities, upstream, transpose_a=True)
        d_bias -= tf.math.unsorted_segment_sum(upstream, targets, tf.shape(probabilities)[1])
        return None, d_y, d_bias

    return _nll(probabilities, logits, targets), gradient


def token_nll(targets, logits):
    """-ln P(target | context) per example, from float32 logits (batch, |V|): training's softmax loss."""
    return _softmax_nll(tf.cast(tf.reshape(targets, [-1]), tf.int32), tf.cast(logits, tf.float32))  # (batch,)


def biased_token_nll(targets, y, bias):
    """`token_nll` of the logits float32(y) + b, from y before its bias in any float dtype (batch, outputs)
    and b (outputs,) float32: a softmax head's training loss (`softmax_training_losses`), whose gradient
    skips two passes over the (batch, outputs) block that the logits' own would take (`benchmarks.throughput`
    measures the step)."""
    return _biased_softmax_nll(tf.cast(tf.reshape(targets, [-1]), tf.int32), y, bias)  # (batch,)


def softmax_training_losses(layer, context, outputs, weight=None):
    """(−ln P per example (batch,), R(θ)) of a head trained by a softmax over its outputs, example i's output
    outputs[i] (weight[i] its weight in the loss; default 1): `biased_token_nll` of the layer's
    `training_output`, b added inside the loss's gradient pass."""
    y, bias, regularization = layer.training_output(context)
    nll = biased_token_nll(outputs, y, bias)
    return (nll if weight is None else nll * weight), regularization


def log_softmax_at(logits, columns):
    """ln softmax(logits)[column] per row, (batch,): the column's logit minus the row's logsumexp, without the
    (batch, |V|) log_softmax (scoring needs one column of it). Core ops only: serving graphs use it."""
    return tf.gather(logits, columns, batch_dims=1) - tf.reduce_logsumexp(logits, axis=1)


@tf.function(jit_compile=True, autograph=False)
def _split_rows_gradient(output, d_head, d_tail, d_square_sum):
    """The gradient of `output` from those of its two slices and of Σ output²."""
    return tf.concat([d_head, d_tail], axis=0) + (2 * d_square_sum) * output


def split_rows(output, split: int):
    """(output[:split], output[split:], Σ output²), the gradient in one pass over `output`.

    Left to the tape, each slice's gradient was a zero-padded copy of the whole (|V| + 1, D) matrix, and the
    two copies and the decay term's 2·w were summed in further passes (`benchmarks.throughput --tail=network`
    measures the difference).
    """

    @tf.custom_gradient
    def forward(output):
        def gradient(d_head, d_tail, d_square_sum):
            return _split_rows_gradient(output, d_head, d_tail, d_square_sum)

        return (output[:split], output[split:], 2 * tf.nn.l2_loss(output)), gradient

    return forward(output)
