"""What training minimizes per example: the full softmax's −ln P, a short list's, or a sampled estimate of it.

- `softmax`: −ln P(w | context) over all |V| words (the paper's criterion).
- short list of N words (`config.shortlist`): the network's softmax covers the list only. With the `class`
  tail (Goodfellow et al. eq. 12.10) it has N + 1 outputs and a target in the tail is trained as output N,
  "the word is in the tail"; with the `backoff` tail (Schwenk 2007) it has N outputs and learns
  P(w | context, w ∈ L): windows whose target is in the tail carry no loss. The n-gram that scores the tail
  enters only at evaluation (`network.shortlist`). With the `network` tail (`network.network_tail`) the
  network has |V| + 1 outputs, the class tail's N + 1 and then the tail's words: each example is trained on
  −ln P_head(output | C), and an example whose target is in the tail also on −ln P_tail(target | C), the tail's
  softmax computed for those examples only.
- `sampled_softmax` and `nce`: each batch scores its targets and `num_sampled` noise words drawn once per
  batch from the unigram distribution raised to 0.75 (the train counts), corrected by the log of each
  word's expected count as in TensorFlow's `sampled_softmax_loss` / `nce_loss`. Sampled softmax removes
  noise words that equal an example's target; NCE (Mnih & Teh 2012) scores each word as data against
  noise with a logistic loss. The output weights are stored as rows and only the rows used are read, so
  their gradients are sparse; R(θ) decays those rows. Evaluation is always the exact softmax.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from nplm_tf.config import Config
from nplm_tf.network.model import NegativeLogLikelihood, token_nll
from nplm_tf.network.network_tail import NetworkTail

NOISE_DISTORTION = 0.75  # noise ∝ count^0.75


@keras.saving.register_keras_serializable(package="nplm_tf")
class ShortListNLL(keras.losses.Loss):
    """−ln P_nn(target | context) over a short list of `list_size` words (see the module docstring).

    Args:
      list_size: N; targets ≥ N are in the tail.
      tail: "class" (the tail is output N), "backoff" (tail targets carry no loss) or "network" (the tail is
        output N, and its words outputs N + 1 onwards: the exact −ln P over the whole vocabulary).
    """

    def __init__(self, list_size, tail="class", name="shortlist_nll", **kwargs):
        super().__init__(name=name, **kwargs)
        if tail not in ("class", "backoff", "network"):
            raise ValueError(f"`tail` must be 'class', 'backoff' or 'network'. Received: tail={tail!r}")
        self.list_size = int(list_size)
        self.tail = tail

    def call(self, y_true, y_pred):
        return shortlist_nll(y_true, y_pred, self.list_size, self.tail)

    def get_config(self):
        return {**super().get_config(), "list_size": self.list_size, "tail": self.tail}


def shortlist_nll(targets, logits, list_size: int, tail: str):
    targets = tf.cast(tf.reshape(targets, [-1]), tf.int32)
    if tail == "network":  # evaluation's formula (training itself runs `NetworkShortList.losses`)
        return -tf.cast(NetworkTail(list_size).log_prob(logits, None, targets), tf.float32)
    if tail == "class":
        return token_nll(tf.minimum(targets, list_size), logits)  # every tail word is output N
    in_list = targets < list_size
    return token_nll(tf.where(in_list, targets, 0), logits) * tf.cast(in_list, tf.float32)


class Objective:
    """The loss of one batch: `losses(model, context, target)` -> (−ln P per example (batch,), R(θ))."""

    custom_step = False  # True: Keras's train_step cannot compute it (the model's output is not used)

    def keras_loss(self) -> keras.losses.Loss:
        raise NotImplementedError

    def losses(self, model, context, target):
        outputs = model(context, training=True)
        regularization = tf.add_n(model.losses) if model.losses else tf.constant(0.0)
        return self.keras_loss().call(target, outputs), regularization


class Softmax(Objective):
    def keras_loss(self):
        return NegativeLogLikelihood()


class ShortList(Objective):
    def __init__(self, list_size: int, tail: str):
        self.list_size, self.tail = list_size, tail

    def keras_loss(self):
        return ShortListNLL(self.list_size, self.tail)


class NetworkShortList(Objective):
    """A short list with the network tail (`network.network_tail`): the head's softmax (N + 1 outputs) for
    every example, the tail's (|V| − N outputs) only for the examples whose target is in the tail, so a
    batch's output layer costs (N + 1 + its tail targets' share of |V| − N) rows of the full softmax's |V|.
    R(θ) decays every output row, as the full softmax does. The output matmuls are float32, as a sampled
    objective's are.

    Args:
      list_size: N.
    """

    custom_step = True

    def __init__(self, list_size: int):
        self.list_size = int(list_size)

    def keras_loss(self):
        return ShortListNLL(self.list_size, "network")  # the exact −ln P from all |V| + 1 outputs

    def losses(self, model, context, target):
        layer = model.get_layer("nplm")
        n = self.list_size
        z, rows, regularization = layer.output_inputs(context, training=True)  # (B, D), [(|V| + 1, ·)] float32
        output = rows[0] if len(rows) == 1 else tf.concat(rows, axis=1)  # (|V| + 1, D)
        head_rows, tail_rows, square_sum = _split_rows(output, n + 1)
        target = tf.cast(tf.reshape(target, [-1]), tf.int32)
        head = tf.matmul(z, head_rows, transpose_b=True) + layer.b[: n + 1]
        nll = token_nll(tf.minimum(target, n), head)  # (B,)
        in_tail = tf.where(target >= n)  # (T, 1)
        tail_logits = tf.matmul(tf.gather_nd(z, in_tail), tail_rows, transpose_b=True) + layer.b[n + 1 :]
        tail_nll = token_nll(tf.gather_nd(target, in_tail) - n, tail_logits)  # (T,)
        nll += tf.scatter_nd(in_tail, tail_nll, tf.shape(nll, out_type=tf.int64))
        regularization += layer.weight_decay * square_sum
        return nll, regularization


@tf.function(jit_compile=True)
def _split_rows_gradient(output, d_head, d_tail, d_square_sum):
    """The gradient of `output` from those of its two slices and of Σ output²."""
    return tf.concat([d_head, d_tail], axis=0) + (2 * d_square_sum) * output


def _split_rows(output, split: int):
    """(output[:split], output[split:], Σ output²), the gradient in one pass over `output`.

    Left to the tape, each slice's gradient was a zero-padded copy of the whole (|V| + 1, D) matrix, and the
    two copies and the decay term's 2·w were summed in further passes; without them the network tail trains
    1.3–1.6× as fast on Brown at N = 4,000 (`benchmarks.throughput`, alternated).
    """

    @tf.custom_gradient
    def forward(output):
        def gradient(d_head, d_tail, d_square_sum):
            return _split_rows_gradient(output, d_head, d_tail, d_square_sum)

        return (output[:split], output[split:], 2 * tf.nn.l2_loss(output)), gradient

    return forward(output)


class Sampled(Objective):
    """Sampled softmax or NCE over the full vocabulary (training only).

    Args:
      kind: "sampled_softmax" or "nce".
      num_sampled: K noise words per batch.
      counts: the train count of every word (its id's), for the noise distribution.
    """

    custom_step = True

    def __init__(self, kind: str, num_sampled: int, counts):
        self.kind = kind
        self.num_sampled = int(num_sampled)
        counts = np.maximum(np.asarray(counts, np.float64), 1.0)  # <unk> may count 0
        self.unigrams = counts.tolist()
        self.vocab_size = len(self.unigrams)

    def keras_loss(self):
        return NegativeLogLikelihood()  # what `evaluate` would report; training uses `losses`

    def losses(self, model, context, target):
        layer = model.get_layer("nplm")
        z, rows, regularization = layer.output_inputs(context, training=True)  # (B, D), [(|V|, ·)]
        target = tf.cast(tf.reshape(target, [-1]), tf.int64)
        batch = tf.shape(target)[0]
        sampled, true_count, sampled_count = tf.random.fixed_unigram_candidate_sampler(
            true_classes=target[:, None],
            num_true=1,
            num_sampled=self.num_sampled,
            unique=True,
            range_max=self.vocab_size,
            distortion=NOISE_DISTORTION,
            unigrams=self.unigrams,
        )
        pooled = tf.concat([target, tf.cast(sampled, tf.int64)], axis=0)  # (B + K,)
        ids, index = tf.unique(pooled)
        distinct = tf.size(ids)
        if isinstance(tf.distribute.get_strategy(), tf.distribute.MultiWorkerMirroredStrategy):
            # B + K rows on every worker (the distinct ones, then the first again, which no index names): the
            # rows' gradients are all-gathered, which fails when their lengths differ between workers.
            ids = tf.concat([ids, tf.fill([tf.size(pooled) - distinct], ids[0])], axis=0)
        used = tf.concat([tf.gather(w, ids) for w in rows], axis=1)  # (U, D) only the rows in use
        bias = tf.gather(layer.b, ids)  # (U,)
        true_rows = tf.gather(used, index[:batch])  # (B, D)
        true_logit = tf.reduce_sum(z * true_rows, axis=1) + tf.gather(bias, index[:batch])  # (B,)
        noise_logits = tf.matmul(z, tf.gather(used, index[batch:]), transpose_b=True) + tf.gather(
            bias, index[batch:]
        )  # (B, K)
        true_logit -= tf.math.log(tf.cast(true_count[:, 0], tf.float32))
        noise_logits -= tf.math.log(tf.cast(sampled_count, tf.float32))[None, :]
        if self.kind == "nce":  # data (label 1) against noise (label 0)
            nll = tf.nn.softplus(-true_logit) + tf.reduce_sum(tf.nn.softplus(noise_logits), axis=1)
        else:
            hit = tf.equal(target[:, None], tf.cast(sampled, tf.int64)[None, :])  # a noise word that is the target
            noise_logits = tf.where(hit, tf.constant(-1e30, tf.float32), noise_logits)
            nll = tf.reduce_logsumexp(tf.concat([true_logit[:, None], noise_logits], axis=1), axis=1) - true_logit
        regularization += layer.weight_decay * tf.reduce_sum(tf.square(used[:distinct]))  # each row once
        return nll, regularization


def make_objective(config: Config, counts) -> Objective:
    """The objective of `config`; `counts` are the vocabulary's train counts (sampled noise)."""
    if config.network_tail:
        return NetworkShortList(config.shortlist)
    if config.shortlist:
        return ShortList(config.shortlist, config.tail)
    if config.loss != "softmax":
        return Sampled(config.loss, config.num_sampled, counts)
    return Softmax()
