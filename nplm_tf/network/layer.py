"""Equation (1) of Bengio, Ducharme, Vincent and Jauvin (2003) as one Keras layer."""

import keras
import tensorflow as tf
from keras import ops

from nplm_tf.network import equation


@keras.saving.register_keras_serializable(package="nplm_tf")
class NPLMLayer(keras.layers.Layer):
    """Word features, tanh hidden layer and direct connections: y = b + W·x + U·tanh(d + H·x).

    x = (C(w_{t-1}), ..., C(w_{t-n+1})) is the concatenation of the context
    words' feature vectors; contexts come oldest first (the text's order), and
    the layer puts the newest word's features first. The layer returns the unnormalized log-probabilities
    y (float32 even under a bfloat16 policy, so the softmax stays float32).

    Weight decay (the paper's R(θ)) is added with `add_loss`:
    λ·(‖H‖² + ‖U‖² + ‖W‖²) + λ·mean over the batch of Σ_j ‖C(w_{t-j})‖². The
    biases b and d are never decayed, and only the C rows in the window are, so
    the gradient of C stays sparse (an `IndexedSlices`) and plain SGD updates
    only those rows, as the paper notes.

    Args:
      vocab_size: |V|, the number of predictable words (softmax width). C has
        |V| + 1 rows: id |V| is the input-only padding `<s>`.
      context_size: n - 1, words in the context.
      feature_dim: m, features per word.
      hidden_dim: h, tanh hidden units; 0 (with `direct`) leaves y = b + W·x.
      direct: whether the direct connections W exist (else W = 0).
      weight_decay: λ ≥ 0.
      dropout: rate in [0, 1) applied in training to x and to the tanh layer
        (not in the paper; 0 turns it off). Masks are stateless, keyed by
        `seed` and a step counter saved with the weights, so a resumed run
        draws the same masks as an uninterrupted one.
      seed: seed of the dropout masks.
      output_size: the softmax width when it is not |V| (a short list's N or
        N + 1 outputs); C still has a row for every word.
      output_rows: store U and W with one row per output word, (|V|, h) and
        (|V|, (n-1)m), so sampled training gathers rows (sparse gradients).
      **kwargs: passed to `keras.layers.Layer` (`name`, `dtype`, ...).

    Example:
    >>> layer = NPLMLayer(vocab_size=10, context_size=2, feature_dim=3, hidden_dim=4)
    >>> layer(ops.array([[1, 2], [10, 10]], dtype="int32")).shape
    (2, 10)

    Reference:
      Bengio et al., "A Neural Probabilistic Language Model", JMLR 3 (2003),
      equation (1).
    """

    def __init__(
        self,
        vocab_size,
        context_size,
        feature_dim,
        hidden_dim,
        direct=False,
        weight_decay=0.0,
        dropout=0.0,
        seed=0,
        output_size=None,
        output_rows=False,
        **kwargs,
    ):
        # Variables are cast by hand in call(): autocasting C would cast the
        # whole matrix each step, and b and the penalty must stay float32.
        # (Keras enters an autocast scope under a mixed policy even with the
        # layer's autocast off, so each variable is also made with autocast=False.)
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        for name, value in (
            ("vocab_size", vocab_size),
            ("context_size", context_size),
            ("feature_dim", feature_dim),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}")
        if not isinstance(hidden_dim, int) or hidden_dim < 0 or (hidden_dim == 0 and not direct):
            raise ValueError(
                "`hidden_dim` must be a positive integer, or 0 with direct=True (the paper's "
                f"linear model). Received: hidden_dim={hidden_dim!r}, direct={direct!r}"
            )
        if weight_decay < 0:
            raise ValueError(f"`weight_decay` must be >= 0. Received: weight_decay={weight_decay!r}")
        self.vocab_size = vocab_size
        self.context_size = context_size
        self.feature_dim = feature_dim
        self.hidden_dim = hidden_dim
        if not 0 <= dropout < 1:
            raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={dropout!r}")
        self.direct = bool(direct)
        self.weight_decay = float(weight_decay)
        self.dropout = float(dropout)
        self.seed = int(seed)
        if output_size is not None and (not isinstance(output_size, int) or output_size < 1):
            raise ValueError(f"`output_size` must be a positive integer or None. Received: output_size={output_size!r}")
        self.output_size = output_size or vocab_size
        self.output_rows = bool(output_rows)

    def build(self, input_shape):
        x_dim = self.context_size * self.feature_dim  # (n-1)m
        self.C = self.add_weight(
            shape=(self.vocab_size + 1, self.feature_dim),
            initializer=keras.initializers.RandomUniform(-0.05, 0.05),
            name="C",
            autocast=False,
        )
        self.H = self.d = self.U = None
        if self.hidden_dim:
            self.H = self.add_weight(
                shape=(x_dim, self.hidden_dim), initializer="glorot_uniform", name="H", autocast=False
            )
            self.d = self.add_weight(shape=(self.hidden_dim,), initializer="zeros", name="d", autocast=False)
            self.U = self.add_weight(
                shape=self._output_shape(self.hidden_dim), initializer="glorot_uniform", name="U", autocast=False
            )
        self.b = self.add_weight(shape=(self.output_size,), initializer="zeros", name="b", autocast=False)
        self.W = None
        if self.direct:
            self.W = self.add_weight(shape=self._output_shape(x_dim), initializer="zeros", name="W", autocast=False)
        self.step = None
        if self.dropout:
            self.step = self.add_weight(
                shape=(),
                dtype="int64",
                initializer="zeros",
                trainable=False,
                aggregation="only_first_replica",
                name="dropout_step",
            )

    def _output_shape(self, inputs):
        return (self.output_size, inputs) if self.output_rows else (inputs, self.output_size)

    def _weights(self):
        return [w for w in (self.H, self.U, self.W) if w is not None]

    def _dropout(self, value, salt):
        replica = tf.distribute.get_replica_context()
        replica_id = replica.replica_id_in_sync_group if replica is not None else 0
        seed = tf.stack([tf.cast(self.seed * 4 + salt, tf.int64), self.step.value * 64 + tf.cast(replica_id, tf.int64)])
        return tf.nn.experimental.stateless_dropout(value, rate=self.dropout, seed=seed)

    def _inputs(self, context, training):
        """x = (C(w_{t-1}), ..., C(w_{t-n+1})) in float32, the same in the compute dtype (after dropout), and
        whether dropout applies."""
        x = equation.word_features(self.C.value, context)  # from the float32 variable: a sparse gradient, no copy of C
        xc = ops.cast(x, self.compute_dtype)
        drop = bool(training) and self.dropout > 0
        if drop:
            self.step.assign_add(1)
            xc = self._dropout(xc, 0)
        return x, xc, drop

    def call(self, context, training=False):
        y, penalty = self._output(context, training)
        if bool(training):
            y = equation.add_bias(y, self.b.value)  # (batch, |V|) float32
        else:  # core ops only in serving graphs
            y = tf.cast(y, tf.float32) + self.b.value
        if penalty is not None:
            self.add_loss(penalty)
        return y

    def training_output(self, context):
        """Training's output as its terms, for a head whose loss forms y = b + Σ part·weight itself
        (`heads.ops.output_softmax_nll`): (the output layer's inputs [tanh(d + H·x)] and/or [x], their weights
        [U] and/or [W] (both in the compute dtype; stored (outputs, inputs) with `output_rows`), b, R(θ)), R(θ)
        the penalty `call` adds with `add_loss` (0 without decay)."""
        parts, weights, penalty = self._output_terms(context, training=True)
        return parts, weights, self.b.value, tf.constant(0.0) if penalty is None else penalty

    def _output(self, context, training):
        """(y − b in the compute dtype (batch, outputs), R(θ) or None without decay)."""
        parts, weights, penalty = self._output_terms(context, training)
        return self._output_sum(parts, weights), penalty

    def _output_terms(self, context, training):
        """(the output layer's inputs, their weights, both in the compute dtype, R(θ) or None without decay)."""
        dtype = self.compute_dtype
        x, xc, drop = self._inputs(context, training)
        # The weights cast to the compute dtype. In training with decay, each
        # weight's Σw² shares a custom gradient with its cast (inference: core ops).
        fused = bool(training) and bool(self.weight_decay)
        square_sums = []

        def cast(w):
            if w is None:
                return None
            if not fused:
                return ops.cast(w.value, dtype)
            w_cast, square_sum = equation.cast_and_square_sum(w.value, dtype)
            square_sums.append(square_sum)
            return w_cast

        H, U, W = cast(self.H), cast(self.U), cast(self.W)
        parts, weights = self._parts(xc, drop, H), [w for w in (U, W) if w is not None]
        if not self.weight_decay:
            return parts, weights, None
        if not fused:  # L2Loss (Σw²/2): one float32 pass over U, and its gradient one multiply.
            square_sums = [2 * tf.nn.l2_loss(w.value) for w in self._weights()]
        penalty = tf.add_n(square_sums) + ops.mean(ops.sum(ops.square(x), axis=1))
        return parts, weights, self.weight_decay * ops.cast(penalty, "float32")

    def _parts(self, xc, drop, H=None):
        """The output layer's inputs: [tanh(d + H·x) (after dropout)] and x when W exists, each (batch, ·). `H`:
        H in the compute dtype, when the caller has it (default: cast here)."""
        d = None
        if self.hidden_dim:
            H = ops.cast(self.H.value, self.compute_dtype) if H is None else H
            d = ops.cast(self.d, self.compute_dtype)
        dropout = (lambda a: self._dropout(a, 1)) if drop else None
        return equation.output_layer_inputs(xc, H if self.hidden_dim else None, d, self.W is not None, dropout)

    def _output_sum(self, parts, weights):
        """Σ over the parts of part·w (compute dtype), with `weights` [U] and/or [W] matching `parts`."""
        return equation.output_sum(parts, weights, self.output_rows)

    def hidden(self, context):
        """Inference: the inputs of the output layer in the compute dtype, [tanh(d + H·x)] and x when W exists
        (each (batch, ·)); `output_logits` maps them to y as `call` does."""
        _, xc, _ = self._inputs(context, training=False)
        return self._parts(xc, drop=False)

    def output_logits(self, parts, start, stop):
        """Inference: y = b + W·x + U·tanh(d + H·x) for outputs start..stop-1 only, float32 (batch, stop - start);
        `parts` from `hidden`, or some of their rows."""
        weights = [
            w.value[start:stop] if self.output_rows else w.value[:, start:stop]
            for w in (self.U, self.W)
            if w is not None
        ]
        y = self._output_sum(parts, [ops.cast(w, self.compute_dtype) for w in weights])
        return tf.cast(y, tf.float32) + self.b.value[start:stop]

    def output_inputs(self, context, training=False):
        """For training by sampling: z = (tanh(d + H·x), x) (float32, (batch, h [+ (n-1)m])), the output weights
        whose rows match z's columns ([U] or [U, W], each (|V|, ·)), and R(θ) without the output weights (a sampled
        objective decays the rows it uses). y = b + z·[U, W]^T is equation (1)."""
        if not self.output_rows:
            raise ValueError("output_inputs needs output_rows=True (the output weights stored as rows).")
        x, xc, drop = self._inputs(context, training)
        parts = self._parts(xc, drop)
        rows = [w.value for w in (self.U, self.W) if w is not None]
        z = ops.cast(ops.concatenate(parts, axis=1) if len(parts) > 1 else parts[0], "float32")
        penalty = ops.mean(ops.sum(ops.square(x), axis=1))
        if self.H is not None:
            penalty = penalty + 2 * tf.nn.l2_loss(self.H.value)
        return z, rows, self.weight_decay * penalty

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.output_size)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "context_size": self.context_size,
                "feature_dim": self.feature_dim,
                "hidden_dim": self.hidden_dim,
                "direct": self.direct,
                "weight_decay": self.weight_decay,
                "dropout": self.dropout,
                "seed": self.seed,
                "output_size": self.output_size,
                "output_rows": self.output_rows,
            }
        )
        return config
