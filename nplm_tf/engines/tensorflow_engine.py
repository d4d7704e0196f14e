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

    @staticmethod
    def logsumexp(x):
        return _tf().reduce_logsumexp(x, axis=1, keepdims=True)

    @staticmethod
    def log_softmax(x):
        return _tf().nn.log_softmax(x)

    # ---------------------------------------------------------------- ranking --

    @staticmethod
    def top_k(x, k):
        tf = _tf()
        top = tf.math.top_k(x, k=k)
        return top.values, tf.cast(top.indices, tf.int64)

    @staticmethod
    def row_min(x):
        return _tf().reduce_min(x, axis=1, keepdims=True)

    @staticmethod
    def argsort(x):
        return _tf().argsort(x, axis=1, stable=True)

    @staticmethod
    def searchsorted(sorted_values, values, side="left", like=None):
        tf = _tf()
        return tf.searchsorted(sorted_values, values, side=side, out_type=like.dtype if like is not None else tf.int64)

    # ----------------------------------------------------------------- random --

    @staticmethod
    def fold_in(seed, data: int):
        tf = _tf()
        return tf.random.experimental.stateless_fold_in(tf.cast(seed, tf.int64), data)

    @staticmethod
    def uniform(seed, rows):
        tf = _tf()
        return tf.random.stateless_uniform([rows], seed=seed, dtype=tf.float64)

    @staticmethod
    def categorical(log_probs, seed):
        return _tf().random.stateless_categorical(log_probs, 1, seed=seed)[:, 0]

    # ---------------------------------------------------------------- elementwise --

    @staticmethod
    def log(x):
        return _tf().math.log(x)

    @staticmethod
    def log1p(x):
        return _tf().math.log1p(x)

    @staticmethod
    def exp(x):
        return _tf().exp(x)

    @staticmethod
    def maximum(x, y):
        tf = _tf()
        x = tf.convert_to_tensor(x)
        return tf.maximum(x, tf.cast(y, x.dtype))

    @staticmethod
    def minimum(x, y):
        tf = _tf()
        x = tf.convert_to_tensor(x)
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
    def floormod(x, y):
        return _tf().math.floormod(x, y)

    @staticmethod
    def cast(x, dtype):
        tf = _tf()
        return tf.cast(x, tf.as_dtype(dtype))

    @staticmethod
    def as_bool(x):
        tf = _tf()
        return tf.cast(x, tf.bool)

    @staticmethod
    def clip(x, low, high):
        return _tf().clip_by_value(x, low, high)

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
    def arange(n, like=None):
        tf = _tf()
        dtype = like.dtype if like is not None else tf.int64
        return tf.range(tf.cast(n, dtype), dtype=dtype)

    @staticmethod
    def fill(shape, value, dtype):
        tf = _tf()
        return tf.fill(shape, tf.constant(value, tf.as_dtype(dtype)))

    @staticmethod
    def rows(x):
        return _tf().shape(x)[0]

    @staticmethod
    def shape(x):
        return _tf().shape(x)

    @staticmethod
    def stack(tensors, axis=1):
        return _tf().stack(tensors, axis=axis)

    @staticmethod
    def tile(x, multiples):
        return _tf().tile(x, multiples)

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
    def cumsum(x, axis=None):
        tf = _tf()
        return tf.cumsum(x) if axis is None else tf.cumsum(x, axis=axis)

    @staticmethod
    def cumprod_after(x):
        return _tf().math.cumprod(x, axis=1, exclusive=True, reverse=True)

    @staticmethod
    def sum(x, axis=None):
        return _tf().reduce_sum(x, axis=axis)

    @staticmethod
    def read(table):
        """A table (a variable) as a tensor to gather from: `tf.gather` on the variable itself is a sparse read,
        which puts it in copy-on-read mode, and every later dense read (`tf.searchsorted`) would copy the whole
        table, megabytes per query. Reading it whole (no copy while nothing writes it) avoids it."""
        return _tf().convert_to_tensor(table)

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
    def ragged_range(lo, hi):
        tf = _tf()
        spans = tf.ragged.range(lo, hi)
        return tf.cast(spans.value_rowids(), tf.int64), spans.flat_values

    @staticmethod
    def scatter_2d(base, rows, columns, values):
        tf = _tf()
        return tf.tensor_scatter_nd_update(base, tf.stack([rows, tf.cast(columns, rows.dtype)], axis=1), values)

    @staticmethod
    def scatter_rows(base, rows, values):
        return _tf().tensor_scatter_nd_update(base, rows[:, None], values)

    @staticmethod
    def scatter_into(size, fill, at, values):
        tf = _tf()
        return tf.tensor_scatter_nd_update(tf.fill([size], tf.constant(fill, tf.int64)), at[:, None], values)

    @staticmethod
    def sliding_window(x, width: int):
        # tensorflow-text's, which slices and stacks with core ops: a SavedModel's graph holds no op of its own.
        return importlib.import_module("tensorflow_text").sliding_window(x, width=width, axis=0)


TENSORFLOW = TensorFlow()
