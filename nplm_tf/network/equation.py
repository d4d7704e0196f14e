"""Equation (1) in pieces for TensorFlow: x from the word features and the output layer's inputs tanh(d + H·x)
and x (`forward`'s, written once for both engines), the sums with U and W, b added, and the logits of chosen
rows. The Keras layer (`layer.NPLMLayer`), the heads' training losses
and the serving graph (`serving.network`) all compute it from these."""

import tensorflow as tf
from keras import ops

from nplm_tf.network.forward import output_layer_inputs, word_features  # noqa: F401  (equation (1)'s first layers)
from nplm_tf.network.heads import ops as head_ops


@tf.function(jit_compile=True, autograph=False)
def _cast_square_sum_gradient(w, upstream_cast, upstream_sum):
    return tf.cast(upstream_cast, w.dtype) + (2 * upstream_sum) * w


def cast_and_square_sum(w, dtype):
    """(w cast to `dtype`, Σw²) of a float32 weight; the gradient in one pass.

    Left to the tape, the gradient was three passes over U (and H, W): the cast
    back to float32, the decay term's 2w·upstream, and their sum.
    """

    @tf.custom_gradient
    def forward(w):
        def gradient(upstream_cast, upstream_sum):
            return _cast_square_sum_gradient(w, upstream_cast, upstream_sum)

        return (tf.cast(w, dtype), 2 * tf.nn.l2_loss(w)), gradient

    return forward(w)


@tf.custom_gradient
def add_bias(y, b):
    """float32(y) + b for (batch, |V|) logits y of any float dtype, b float32."""

    def gradient(upstream):
        db = tf.squeeze(tf.matmul(tf.ones([1, tf.shape(upstream)[0]], upstream.dtype), upstream), 0)
        return tf.cast(upstream, y.dtype), db  # db = Σ over the batch, as a (fast) matmul

    return head_ops.biased_logits(y, b), gradient


def output_sum(parts, weights, rows: bool = False):
    """Σ over the parts of part·w: equation (1)'s W·x + U·tanh(d + H·x) before b, with `weights` [U] and/or
    [W] matching `parts`, stored (inputs, outputs), or (outputs, inputs) with `rows`."""
    y = None
    for part, w in zip(parts, weights, strict=True):
        term = ops.matmul(part, ops.transpose(w)) if rows else ops.matmul(part, w)
        y = term if y is None else y + term
    return y


def row_logits(z, rows, bias):
    """y of chosen outputs for every example: z·rows^T + b, (batch, k), with z = (tanh(d + H·x), x) as
    `NPLMLayer.output_inputs` gives it, `rows` those outputs' rows of [U, W] (k, ·) and `bias` their b (k,)."""
    return tf.matmul(z, rows, transpose_b=True) + bias


def own_row_logits(z, rows, bias):
    """y of one output per example, its own: Σ z·row + b, (batch,), `rows` (batch, ·) and `bias` (batch,)."""
    return tf.reduce_sum(z * rows, axis=1) + bias
