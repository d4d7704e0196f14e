"""What training minimizes per example: an output head's own loss, or a sampled estimate of the full softmax's.

- `HeadObjective`: the head's −ln P_nn (`network.heads`): the full softmax's over all |V| words (the
  paper's criterion), or a short list's over its outputs.
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

from nplm_tf.network import equation, heads
from nplm_tf.network.heads.ops import token_nll

NOISE_DISTORTION = 0.75  # noise ∝ count^0.75


@keras.saving.register_keras_serializable(package="nplm_tf")
class NegativeLogLikelihood(keras.losses.Loss):
    """Mean -ln P(target | context): the paper's training criterion before R(θ)."""

    def __init__(self, name="nll", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        return token_nll(y_true, y_pred)


def of_config(config, head: heads.Head, counts) -> Objective:
    """What training minimizes: the head's loss, or (`--loss`) a sampled estimate of the full softmax's.
    `counts`: the vocabulary's train counts (the sampled losses' noise)."""
    if head.sampled:
        return Sampled(config.loss, config.num_sampled, counts, seed=config.seed)
    return HeadObjective(head)


class Objective:
    """The loss of one batch: `losses(model, context, target, step, worker)` -> (−ln P per example (batch,),
    R(θ)). `step`: the step counter (default: the model's optimizer's); `worker`: local SGD's worker index
    (each worker's model is replica 0 of its own). A sampled objective keys its noise by both."""

    custom_step = False  # True: the model's whole output is not what it reads

    def keras_loss(self) -> keras.losses.Loss:
        raise NotImplementedError

    def losses(self, model, context, target, step=None, worker=0):
        outputs = model(context, training=True)
        regularization = tf.add_n(model.losses) if model.losses else tf.constant(0.0)
        return self.keras_loss().call(target, outputs), regularization


@keras.saving.register_keras_serializable(package="nplm_tf")
class HeadNLL(keras.losses.Loss):
    """−ln P_nn(target | context) per example as an output head trains it (`Head.nll`), named by the head.

    Args:
      head: the head's name (`heads.named`).
      list_size: N.
      vocab_size: |V|.
    """

    def __init__(self, head="softmax", list_size=0, vocab_size=1, name="head_nll", **kwargs):
        super().__init__(name=name, **kwargs)
        self.head, self.list_size, self.vocab_size = head, int(list_size), int(vocab_size)
        self._head = heads.named(head, self.list_size, self.vocab_size)

    def call(self, y_true, y_pred):
        return self._head.nll(y_true, y_pred)

    def get_config(self):
        return {**super().get_config(), "head": self.head, "list_size": self.list_size, "vocab_size": self.vocab_size}


class HeadObjective(Objective):
    """An output head's own loss (`heads.base.Head`): Keras's step on the whole output layer, or the head's
    step on the part of it that it reads (`Head.training_losses`)."""

    def __init__(self, head):
        self.head = head
        self.custom_step = type(head).training_losses is not heads.Head.training_losses

    def keras_loss(self):
        return HeadNLL(self.head.name, self.head.list_size, self.head.vocab_size)

    def losses(self, model, context, target, step=None, worker=0):
        if self.custom_step:
            return self.head.training_losses(model.get_layer("nplm"), context, target)
        return super().losses(model, context, target)


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

    def noise_key(self, model, step=None, worker=0):
        """The stateless seed of this step's noise: (seed, step, replica). The step counter is the optimizer's,
        saved with the run, so a resumed run draws what an uninterrupted one would have."""
        step = step if step is not None else model.optimizer.iterations
        step = tf.cast(tf.convert_to_tensor(step), tf.int64)
        replica = tf.distribute.get_replica_context()
        replica_id = tf.cast(replica.replica_id_in_sync_group if replica is not None else 0, tf.int64)
        key = tf.stack([tf.constant(self.seed, tf.int64), step])
        key = tf.random.experimental.stateless_fold_in(key, tf.constant(worker, tf.int64))
        return tf.random.experimental.stateless_fold_in(key, replica_id)

    def keras_loss(self):
        return NegativeLogLikelihood()  # what `evaluate` would report; training uses `losses`

    def losses(self, model, context, target, step=None, worker=0):
        layer = model.get_layer("nplm")
        z, rows, regularization = layer.output_inputs(context, training=True)  # (B, D), [(|V|, ·)]
        target = tf.cast(tf.reshape(target, [-1]), tf.int64)
        batch = tf.shape(target)[0]
        sampled, true_count, sampled_count = self.sampler(self.noise_key(model, step, worker), target)
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
        true_logit = equation.own_row_logits(z, true_rows, tf.gather(bias, index[:batch]))  # (B,)
        noise_logits = equation.row_logits(z, tf.gather(used, index[batch:]), tf.gather(bias, index[batch:]))
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
