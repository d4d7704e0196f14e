"""The class-factored softmax of Goodman (2001) and Mikolov et al. (2011): the vocabulary in C classes by
frequency, P(w | C) = P(c(w) | C) · P(w | c(w), C), exactly normalized over the vocabulary.

Word ids run from the most frequent down (`pipelines.vocabulary`), and class c holds the S = ⌈|V| / C⌉ words
c·S .. c·S + S − 1 (the last class fewer): frequency bands of equal size, so that a class's softmax always
has S outputs. The network has C + |V| outputs: the classes' (0..C−1), then the words' (C + w), and

    P(c | C) = softmax(y_0..C−1)_c,   P(w | c, C) = softmax of the outputs of c's words, at w.

Training computes, per example, the C class outputs and the S outputs of its target's class only: C + S
rows of the output layer instead of |V| (about 2√|V| at the default C = ⌈√|V|⌉). Scoring (`log_prob`,
`distribution`, ranking, sampling) reads the whole output layer. Contexts are not read.
"""

from __future__ import annotations

import math

import numpy as np

from nplm_tf import engines
from nplm_tf.network.heads import base
from nplm_tf.network.heads.base import tf


def class_count(classes: int, vocab_size: int) -> int:
    """C of a config's `classes` over |V| words: itself, or ⌈√|V|⌉ for −1."""
    return math.ceil(math.sqrt(vocab_size)) if classes == -1 else int(classes)


class ClassSoftmax(base.Head):
    """Exact P(w | C) from C class outputs and |V| word outputs. `list_size` holds C (the head's one size)."""

    name = "classes"
    output_rows = True  # training reads its target classes' rows only
    nplm_refusal = (
        "it is a class-factored softmax (--classes), which the nplm format cannot hold (its output is one "
        "softmax over every word); train it without --classes."
    )

    @classmethod
    def from_config(cls, config, vocab_size: int, ngram=None) -> ClassSoftmax:
        return cls(class_count(config.classes, vocab_size), vocab_size, ngram)

    def __init__(self, list_size: int, vocab_size: int, ngram=None, self_normalize: float = 0.0):
        super().__init__(list_size, vocab_size, ngram, self_normalize)
        if not 1 <= self.list_size <= self.vocab_size:
            raise ValueError(f"{self.list_size} classes over |V| = {self.vocab_size}: need 1 ≤ C ≤ |V|.")
        self.size = -(-self.vocab_size // self.list_size)  # S, words a class
        # C once no class is empty (|V| = 10, C = 6: S = 2, C = 5)
        self.classes = self.list_size = -(-self.vocab_size // self.size)

    def output_size(self) -> int:
        return self.classes + self.vocab_size

    def trained_width(self, counts) -> float:
        return float(self.classes + self.size)

    def initial_bias(self, counts) -> np.ndarray:
        """ln of each class's share of train tokens, then ln of each word's share of its class's."""
        counts = base.unigram(counts)
        padded = np.zeros(self.classes * self.size)
        padded[: self.vocab_size] = counts
        totals = padded.reshape(self.classes, self.size).sum(axis=1)
        within = np.log(counts / np.repeat(totals, self.size)[: self.vocab_size])
        return np.append(base.log_frequencies(totals), within).astype(np.float32)

    def _window(self, target, engine=engines.TENSORFLOW):
        """(the target's class, its place in it, the class's word ids (rows, S) clipped to |V| − 1, which of
        them are words); `target` int64 in `engine`'s arrays."""
        cls = target // self.size
        ids = cls[:, None] * self.size + engine.arange(self.size)[None, :]
        return cls, target - cls * self.size, engine.minimum(ids, self.vocab_size - 1), ids < self.vocab_size

    # ----------------------------------------------------------------------- training --

    def nll(self, targets, logits):
        """The exact −ln P from all C + |V| outputs (what `evaluate` reports; training runs `training_losses`)."""
        targets = tf.cast(tf.reshape(targets, [-1]), tf.int32)
        return -tf.cast(self.log_prob(base.Outputs(logits=logits), None, targets), tf.float32)

    def training_losses(self, layer, context, target):
        """−ln P(class) from the C class rows and −ln P(w | class) from the S rows of the target's class, per
        example; R(θ) decays every output row, as the full softmax does. The output matmuls are float32."""
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.network import equation
        from nplm_tf.network.heads import ops

        c = self.classes
        z, rows, regularization = layer.output_inputs(context, training=True)  # (B, D), [(C + |V|, ·)] float32
        output = rows[0] if len(rows) == 1 else tf.concat(rows, axis=1)
        class_rows, word_rows, square_sum = ops.split_rows(output, c)
        target = tf.cast(tf.reshape(target, [-1]), tf.int64)
        cls, place, ids, real = self._window(target)
        nll = ops.token_nll(cls, equation.row_logits(z, class_rows, layer.b[:c]))
        weights = tf.gather(word_rows, ids)  # (B, S, D)
        logits = tf.einsum("bd,bsd->bs", z, weights) + tf.gather(layer.b[c:], ids)
        logits = tf.where(real, logits, tf.constant(-1e30, logits.dtype))
        nll += ops.token_nll(place, logits)
        return nll, regularization + layer.weight_decay * square_sum

    # ------------------------------------------------------------------------ graphs --

    def log_prob(self, outputs, context, target, engine=engines.TENSORFLOW):
        logits = base.as_outputs(outputs, engine).logits()
        cls, place, ids, real = self._window(engine.int64(target), engine)
        ln_class = engine.log_softmax_at(logits[:, : self.classes], cls)
        words = engine.where(real, engine.take_along_rows(logits[:, self.classes :], ids), -np.inf)
        return engine.to64(ln_class) + engine.to64(engine.log_softmax_at(words, place))

    def distribution(self, outputs, context, engine=engines.TENSORFLOW):
        """P(c | C) · P(w | c, C) over every word, from the class softmax and one softmax per class's block."""
        y = engine.to64(base.as_outputs(outputs, engine).logits())
        c, missing = self.classes, self.classes * self.size - self.vocab_size
        words = engine.pad_columns(y[:, c:], missing, -np.inf)
        within = engine.reshape(engine.softmax(engine.reshape(words, [-1, self.size])), [-1, c, self.size])
        blocks = within * engine.softmax(y[:, :c])[:, :, None]
        return engine.reshape(blocks, [-1, c * self.size])[:, : self.vocab_size]
