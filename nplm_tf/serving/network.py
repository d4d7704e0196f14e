"""One network in the serving graph (`server.Server` holds one, or an ensemble's): equation (1) on the trained
weights, kept in the compute dtype, and its head's outputs."""

from __future__ import annotations

import keras
import tensorflow as tf

from nplm_tf.network import equation


class Network(tf.Module):
    """One network as the serving graph computes it: its weights held in the compute dtype, and its head.

    Args:
      model: the trained Keras model, context ids (batch, n-1) -> outputs, with its `head` (`network.heads`),
        which turns them into P over the whole vocabulary (a short list's with its tail).
    """

    def __init__(self, model: keras.Model, name: str = "network"):
        super().__init__(name=name)
        layer = model.get_layer("nplm")
        self.compute_dtype = tf.as_dtype(layer.compute_dtype)
        # The weights as the layer uses them: cast once here, not on every
        # request (casting U per call would cost more than a one-row forward pass).
        held = lambda w, dtype: tf.Variable(tf.cast(w, dtype), trainable=False)  # noqa: E731
        # Output weights stored as rows (sampled training) are transposed once here: the same matmul as any model.
        output = lambda w: tf.transpose(w) if w is not None and layer.output_rows else w  # noqa: E731
        self.C, self.H, self.d = (
            held(w, self.compute_dtype) if w is not None else None for w in (layer.C, layer.H, layer.d)
        )
        self.direct = layer.W is not None  # y has the direct connections W·x
        self.b = held(layer.b, tf.float32)
        self.head = model.head
        self.head_state = self.head.graph_state()  # its tables, tracked by the SavedModel
        self.head.prepare_serving()  # next_word's tables
        self.outputs = int(self.b.shape[0])
        self.context_size = layer.context_size  # n - 1, the words the network reads
        # The output weights [U; W] in column blocks: the network tail's head (outputs 0..N) and tail apart, so
        # that computing either reads its own block instead of copying a slice of the matrix on every request.
        after_list = self.head.block_bounds_after_list
        bounds = [0, self.head.list_size + 1, self.outputs] if after_list else [0, self.outputs]
        weights = [output(w) for w in (layer.U, layer.W) if w is not None]
        self.output_blocks = [
            [held(w[:, start:stop], self.compute_dtype) for w in weights] for start, stop in zip(bounds, bounds[1:])
        ]
        self.block_bounds = bounds

    def hidden(self, context: tf.Tensor) -> list[tf.Tensor]:
        """(B, c) oldest first -> the output layer's inputs, [tanh(d + H·x)] and x when W exists, as
        `NPLMLayer.hidden` computes them (`layer.output_layer_inputs`), from the last n-1 words."""
        if context.shape[1] != self.context_size:  # a mixture's longer context: the network's part
            context = context[:, context.shape[1] - self.context_size :]
        return equation.output_layer_inputs(equation.word_features(self.C, context), self.H, self.d, self.direct)

    def output_logits(self, parts: list[tf.Tensor], start=0, stop=None) -> tf.Tensor:
        """y = b + W·x + U·tanh(d + H·x) for outputs start..stop-1, (B, stop - start) float32. start and stop
        (None: the last output) must be bounds of the held blocks (`block_bounds`)."""
        stop = self.outputs if stop is None else stop
        bounds = self.block_bounds
        if start not in bounds or stop not in bounds or start >= stop:
            raise ValueError(f"outputs {start}..{stop} are not a run of the served blocks {bounds}.")
        ys = [
            equation.output_sum(parts, block) for block in self.output_blocks[bounds.index(start) : bounds.index(stop)]
        ]
        y = ys[0] if len(ys) == 1 else tf.concat(ys, axis=1)
        return tf.cast(y, tf.float32) + self.b[start:stop]
