"""The TensorFlow engine (`nplm_tf.engines`): core ops only, so that a SavedModel's graph needs no custom op.
TensorFlow is imported when a method first runs."""

from __future__ import annotations

import importlib


def _tf():
    return importlib.import_module("tensorflow")


class TensorFlow:
    name = "tensorflow"

    # ------------------------------------------------------------------ softmax --

    @staticmethod
    def log_softmax_at(logits, columns):
        """ln softmax(logits)[row, column] per row, (rows,) in the logits' float type: the column's logit minus
        the row's logsumexp, without the (rows, outputs) log_softmax."""
        tf = _tf()
        return tf.gather(logits, columns, batch_dims=1) - tf.reduce_logsumexp(logits, axis=1)

    @staticmethod
    def log_normalizer(logits):
        """ln Z = ln Σ_w exp(y_w) per row, float64, summed in float32."""
        tf = _tf()
        return tf.cast(tf.reduce_logsumexp(tf.cast(logits, tf.float32), axis=1), tf.float64)

    @staticmethod
    def softmax(logits):
        return _tf().nn.softmax(logits)

    # ---------------------------------------------------------------- elementwise --

    @staticmethod
    def log(x):
        return _tf().math.log(x)

    @staticmethod
    def log1p(x):
        return _tf().math.log1p(x)

    @staticmethod
    def minimum(x, y):
        tf = _tf()
        return tf.minimum(x, tf.cast(y, x.dtype))

    @staticmethod
    def where(condition, x, y):
        tf = _tf()
        x = tf.convert_to_tensor(x)
        return tf.where(condition, x, tf.cast(y, x.dtype))

    @staticmethod
    def softplus(x):
        return _tf().nn.softplus(x)

    @staticmethod
    def sigmoid(x):
        return _tf().sigmoid(x)

    @staticmethod
    def to64(x):
        tf = _tf()
        return tf.cast(x, tf.float64)

    @staticmethod
    def int64(x):
        tf = _tf()
        return tf.cast(x, tf.int64)

    @staticmethod
    def ones_like(x):
        return _tf().ones_like(x)

    @staticmethod
    def as_int(mask):
        tf = _tf()
        return tf.cast(mask, tf.int32)

    @staticmethod
    def tanh(x):
        return _tf().tanh(x)

    @staticmethod
    def matmul(x, y):
        return _tf().matmul(x, y)

    # ---------------------------------------------------------------------- shape --

    @staticmethod
    def arange(n):
        tf = _tf()
        return tf.range(n, dtype=tf.int64)

    @staticmethod
    def concat(tensors, axis=1):
        return _tf().concat(tensors, axis=axis)

    @staticmethod
    def reshape(x, shape):
        return _tf().reshape(x, shape)

    @staticmethod
    def pad_columns(x, count, value):
        return _tf().pad(x, [[0, 0], [0, count]], constant_values=value)

    # -------------------------------------------------------------------- indices --

    @staticmethod
    def repeat(x, counts):
        return _tf().repeat(x, counts)

    @staticmethod
    def cumsum(x):
        return _tf().cumsum(x)

    @staticmethod
    def sum(x):
        return _tf().reduce_sum(x)

    @staticmethod
    def size(x):
        tf = _tf()
        return tf.size(x, out_type=tf.int64)

    @staticmethod
    def gather(table, rows):
        return _tf().gather(table, rows)

    @staticmethod
    def take_along_rows(x, columns):
        return _tf().gather(x, columns, batch_dims=1)

    @staticmethod
    def nonzero(mask):
        return _tf().where(mask)[:, 0]

    @staticmethod
    def add_at(base, rows, values):
        tf = _tf()
        return base + tf.scatter_nd(rows[:, None], values, tf.shape(base, out_type=tf.int64))

    @staticmethod
    def scatter_into(size, fill, at, values):
        tf = _tf()
        return tf.tensor_scatter_nd_update(tf.fill([size], tf.constant(fill, tf.int64)), at[:, None], values)

    @staticmethod
    def sliding_window(x, width: int):
        # tensorflow-text's, which slices and stacks with core ops: a SavedModel's graph holds no op of its own.
        return importlib.import_module("tensorflow_text").sliding_window(x, width=width, axis=0)


TENSORFLOW = TensorFlow()
