"""Equation (1) in pieces: x from the word features, the output layer's inputs tanh(d + H·x) and x, the sums with
U and W, b added, and the logits of chosen rows. The Keras layer (`layer.NPLMLayer`), the heads' training losses
and the serving graph (`serving.network`) all compute it from these."""

import tensorflow as tf
from keras import ops

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


def word_features(C, context):
    """x = (C(w_{t-1}), ..., C(w_{t-n+1})), (batch, (n-1)m), of contexts (batch, n-1) oldest first (the text's
    order, which every part of the project uses): the newest word's features first, as in the paper."""
    features = tf.gather(C, tf.reverse(tf.cast(context, tf.int32), axis=[1]))  # (batch, n-1, m)
    return ops.reshape(features, (-1, int(context.shape[1]) * int(C.shape[1])))


def output_layer_inputs(x, H, d, direct: bool, dropout=None) -> list:
    """The output layer's inputs: [tanh(d + H·x)] (after `dropout`, a function, when given) where H exists,
    and x itself where W does, each (batch, ·), in x's dtype."""
    parts = []
    if H is not None:
        a = ops.tanh(ops.matmul(x, H) + d)  # (batch, h)
        parts.append(dropout(a) if dropout is not None else a)
    return parts + [x] if direct else parts


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
