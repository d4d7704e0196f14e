"""The TensorFlow operations the heads share: the softmax's −ln P with its one-pass gradient, one column of a
log-softmax, and a matrix split in two with the decay of both in one gradient pass."""

from __future__ import annotations

import tensorflow as tf

from nplm_tf import engines


@tf.function(jit_compile=True, autograph=False)
def biased_logits(y, bias):
    """float32(y) + b, (batch, outputs), of logits y before their bias in any float dtype: one XLA pass instead
    of a cast and an add."""
    return tf.cast(y, tf.float32) + bias


@tf.function(jit_compile=True, autograph=False)
def _xent_gradient(probabilities, targets, upstream, dtype=tf.float32, scale=None):
    # d(-ln p_t)/dz = p - onehot(t), scaled by the upstream gradient, in `dtype`: one XLA pass. `scale` (batch,):
    # p's factor per row, 1 + 2α·ln Z under self-normalization (d(α·(ln Z)²)/dz = 2α·ln Z·p).
    onehot = tf.one_hot(targets, tf.shape(probabilities)[1], dtype=probabilities.dtype)
    if scale is not None:
        probabilities = probabilities * scale[:, None]
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


def token_nll(targets, logits):
    """-ln P(target | context) per example, from float32 logits (batch, |V|): training's softmax loss."""
    return _softmax_nll(tf.cast(tf.reshape(targets, [-1]), tf.int32), tf.cast(logits, tf.float32))  # (batch,)


def output_softmax_nll(targets, parts, weights, bias, rows: bool = False, self_normalize: float = 0.0):
    """−ln P(target | context) per example (batch,) of the logits y = b + Σ part·weight (`NPLMLayer.
    training_output`: parts (batch, inputs) and weights (inputs, outputs), or (outputs, inputs) with `rows`, in
    the compute dtype; b (outputs,) float32): a softmax head's training loss, `token_nll` of those logits.

    b is added in the pass that casts y to float32, and the gradient skips two passes over the (batch, outputs)
    block that the logits' own (`NPLMLayer.call`'s) takes: y's gradient leaves the pass that forms it in y's
    dtype, and b's, Σ over the batch of y's, is one more row of the first weight's gradient matmul (that part
    with a column of ones; `benchmarks.throughput` measures the step). So b's gradient has the precision of
    the weights' (bfloat16 under a mixed policy).

    `self_normalize` α > 0 adds α·(ln Z)² to each example's loss (ln Z = y_t + (−ln P), no pass of its own), and
    its gradient to the same pass.
    """
    targets = tf.cast(tf.reshape(targets, [-1]), tf.int32)
    count = len(parts)

    @tf.custom_gradient
    def forward(targets, bias, *tensors):
        parts, weights = tensors[:count], tensors[count:]
        y = tf.add_n([tf.matmul(p, w, transpose_b=rows) for p, w in zip(parts, weights, strict=True)])
        logits = biased_logits(y, bias)
        probabilities = tf.nn.softmax(logits)
        nll = _nll(probabilities, logits, targets)
        log_z = tf.gather(logits, targets, axis=1, batch_dims=1) + nll if self_normalize else None

        def gradient(upstream):
            scale = 1.0 + (2.0 * self_normalize) * log_z if self_normalize else None
            d_y = _xent_gradient(probabilities, targets, upstream, y.dtype, scale)
            first = tf.concat([parts[0], tf.ones([tf.shape(parts[0])[0], 1], parts[0].dtype)], axis=1)
            if rows:  # (outputs, inputs + 1): [dW | db]
                folded = tf.matmul(d_y, first, transpose_a=True)
                d_first, d_bias = folded[:, :-1], folded[:, -1]
            else:  # (inputs + 1, outputs): [dW; db]
                folded = tf.matmul(first, d_y, transpose_a=True)
                d_first, d_bias = folded[:-1], folded[-1]
            d_weights = [d_first] + [
                tf.matmul(d_y, p, transpose_a=True) if rows else tf.matmul(p, d_y, transpose_a=True) for p in parts[1:]
            ]
            d_parts = [tf.matmul(d_y, w, transpose_b=not rows) for w in weights]
            return None, tf.cast(d_bias, tf.float32), *d_parts, *d_weights

        return (nll + self_normalize * tf.square(log_z) if self_normalize else nll), gradient

    return forward(targets, bias, *parts, *weights)


def softmax_training_losses(layer, context, outputs, weight=None, self_normalize: float = 0.0):
    """(−ln P per example (batch,), R(θ)) of a head trained by a softmax over its outputs, example i's output
    outputs[i] (weight[i] its weight in the loss; default 1): `output_softmax_nll` of the layer's
    `training_output` (`self_normalize`: its α)."""
    parts, weights, bias, regularization = layer.training_output(context)
    nll = output_softmax_nll(outputs, parts, weights, bias, layer.output_rows, self_normalize)
    return (nll if weight is None else nll * weight), regularization


def log_softmax_at(logits, columns):
    """ln softmax(logits)[column] per row, (batch,): `engines.TENSORFLOW`'s, which the heads use in graphs."""
    return engines.TENSORFLOW.log_softmax_at(logits, columns)


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
