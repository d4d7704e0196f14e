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
  word's expected count as in TensorFlow's `sampled_softmax_loss` / `nce_loss` (`NoiseSampler`: the
  draws of `tf.random.fixed_unigram_candidate_sampler`, keyed by the step so that a resumed run draws
  the same noise as an uninterrupted one). Sampled softmax removes
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
    step = None  # the step counter, when not the model's optimizer's (`Sampled.noise_key`)
    worker = 0  # local SGD's worker index (`Sampled.noise_key`)

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


@tf.function(jit_compile=True, autograph=False)
def _split_rows_gradient(output, d_head, d_tail, d_square_sum):
    """The gradient of `output` from those of its two slices and of Σ output²."""
    return tf.concat([d_head, d_tail], axis=0) + (2 * d_square_sum) * output


def _split_rows(output, split: int):
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


class NoiseSampler:
    """`num_sampled` distinct noise words per call, drawn as `tf.random.fixed_unigram_candidate_sampler(unique=True)`
    draws them, but from stateless random numbers: the same key gives the same words.

    Words are drawn with replacement from P(w) ∝ count(w)^0.75 until `num_sampled` distinct ones have come; with
    t draws in all, a word's expected count is `num_sampled`·P(w) when none was rejected (t = `num_sampled`), and
    otherwise 1 − (1 − P(w))^t, the chance it came at least once: TensorFlow's sampler reports the same. The
    first 2·`num_sampled` + 64 draws are almost always enough; when not, rounds as long as all draws before
    them follow, so even a `num_sampled` near |V| takes a few rounds of vectorized draws, not one at a time.

    Args:
      counts: the train count of every word (its id's).
      num_sampled: K < |V|.
    """

    def __init__(self, counts, num_sampled: int):
        counts = np.maximum(np.asarray(counts, np.float64), 1.0)  # <unk> may count 0
        probability = counts**NOISE_DISTORTION
        probability /= probability.sum()
        cdf = np.cumsum(probability)
        cdf[-1] = np.inf  # every uniform draw in [0, 1) lands on a word despite rounding
        self.probability, self.cdf = probability, cdf
        self.num_sampled = int(num_sampled)
        if not 0 < self.num_sampled < len(probability):
            raise ValueError(f"num_sampled={num_sampled} must be in [1, |V| = {len(probability)}).")

    def __call__(self, key, true_classes):
        """(noise ids (K,) int64 in order of first draw, expected counts of `true_classes` (B,) and of the noise
        (K,), float32); `key`: a stateless seed, shape (2,) int64."""
        k = self.num_sampled
        cdf = tf.constant(self.cdf, tf.float64)

        def draw(round_, length):
            # One row of `length` draws (the same numbers as a vector of them): a 1-D `tf.searchsorted` of a
            # length unknown until run time fails inside the loop below once in a graph ("Leading dim_size of
            # both tensors must match", TensorFlow 2.21), so a `num_sampled` near |V| crashed training.
            uniform = tf.random.stateless_uniform(
                [1, length], seed=tf.random.experimental.stateless_fold_in(key, round_), dtype=tf.float64
            )
            return tf.searchsorted(cdf[None, :], uniform, side="right", out_type=tf.int64)[0]

        def more(round_, draws, ids, which):
            return tf.size(ids) < k

        def another(round_, draws, ids, which):
            draws = tf.concat([draws, draw(round_, tf.size(draws))], axis=0)
            return (round_ + 1, draws, *tf.unique(draws))

        def rounds(draws, ids, which):
            vector = tf.TensorShape([None])
            return tf.while_loop(
                more,
                another,
                (tf.constant(1, tf.int64), draws, ids, which),
                shape_invariants=(tf.TensorShape([]), vector, vector, vector),
            )[1:]

        draws = draw(0, 2 * k + 64)
        ids, which = tf.unique(draws)  # ids in order of first draw; draw i is ids[which[i]]
        # Mostly one round is enough; a loop in every step's graph slowed Brown's NCE step by about a tenth.
        draws, ids, which = tf.cond(tf.size(ids) < k, lambda: rounds(draws, ids, which), lambda: (draws, ids, which))
        tries = tf.cast(tf.argmax(tf.equal(which, k - 1)) + 1, tf.float64)  # draws up to the K-th distinct word's
        probability = tf.constant(self.probability, tf.float64)

        def expected(words):
            p = tf.gather(probability, words)
            rejected = -tf.math.expm1(tries * tf.math.log1p(-p))
            return tf.cast(tf.where(tries == k, p * k, rejected), tf.float32)

        sampled = ids[:k]
        return sampled, expected(tf.cast(true_classes, tf.int64)), expected(sampled)


class Sampled(Objective):
    """Sampled softmax or NCE over the full vocabulary (training only).

    Args:
      kind: "sampled_softmax" or "nce".
      num_sampled: K noise words per batch.
      counts: the train count of every word (its id's), for the noise distribution.
      seed: the noise's seed (with the step, the replica and the worker).
    """

    custom_step = True

    def __init__(self, kind: str, num_sampled: int, counts, seed: int = 0):
        self.kind = kind
        self.num_sampled = int(num_sampled)
        self.sampler = NoiseSampler(counts, num_sampled)
        self.seed = int(seed)

    def noise_key(self, model):
        """The stateless seed of this step's noise: (seed, step, replica). The step counter is the optimizer's,
        saved with the run, so a resumed run draws what an uninterrupted one would have."""
        step = self.step if self.step is not None else model.optimizer.iterations
        step = tf.cast(tf.convert_to_tensor(step), tf.int64)
        replica = tf.distribute.get_replica_context()
        replica_id = tf.cast(replica.replica_id_in_sync_group if replica is not None else 0, tf.int64)
        key = tf.stack([tf.constant(self.seed, tf.int64), step])
        key = tf.random.experimental.stateless_fold_in(key, tf.constant(self.worker, tf.int64))
        return tf.random.experimental.stateless_fold_in(key, replica_id)

    def keras_loss(self):
        return NegativeLogLikelihood()  # what `evaluate` would report; training uses `losses`

    def losses(self, model, context, target):
        layer = model.get_layer("nplm")
        z, rows, regularization = layer.output_inputs(context, training=True)  # (B, D), [(|V|, ·)]
        target = tf.cast(tf.reshape(target, [-1]), tf.int64)
        batch = tf.shape(target)[0]
        sampled, true_count, sampled_count = self.sampler(self.noise_key(model), target)
        pooled = tf.concat([target, sampled], axis=0)  # (B + K,)
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
        true_logit -= tf.math.log(true_count)
        noise_logits -= tf.math.log(sampled_count)[None, :]
        if self.kind == "nce":  # data (label 1) against noise (label 0)
            nll = tf.nn.softplus(-true_logit) + tf.reduce_sum(tf.nn.softplus(noise_logits), axis=1)
        else:
            hit = tf.equal(target[:, None], sampled[None, :])  # a noise word that is the target
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
        return Sampled(config.loss, config.num_sampled, counts, seed=config.seed)
    return Softmax()
