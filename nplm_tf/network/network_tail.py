"""A short list whose tail is scored by the network itself: exact probabilities over the whole vocabulary.

With L the N most frequent words (ids 0..N-1) and T the rest, the network has |V| + 1 outputs: the list's N,
then "the word is in the tail" (output N), then the tail's words (output N + 1 + i - N for word i ≥ N). Two
softmaxes share its hidden layer:

    P(i | C) = P_head(i | C) for i in L,   P_head(tail | C) · P_tail(i | C) for i in T,

with P_head the softmax of outputs 0..N and P_tail that of outputs N+1..|V|. It is the class tail
(Goodfellow et al. eq. 12.10) with the n-gram's P_ng(i | C) / (1 − m(C)) replaced by the network's own
P_tail(i | C): a two-level softmax whose first level is the short list (the adaptive softmax of Grave et al.
2017, with one tail cluster at full width). Training and scoring compute the tail's softmax only for the
examples whose target is in the tail (`objectives.NetworkShortList`, `log_prob_of_outputs`), which is where it
is cheaper than the full softmax. Ranking and sampling compute the tail's outputs only for the rows that can
need them (`top_k_of_outputs`, `sample_of_outputs`); the dense `distribution` computes them all.

The interface is `shortlist.ShortListTail`'s, so evaluation, mixtures and the SavedModel use either. Core
TensorFlow ops in float64; contexts are not read (the network has seen them).
"""

from __future__ import annotations

import tensorflow as tf

from nplm_tf.network import model as model_lib


class NetworkTail(tf.Module):
    """Exact P(w | C) from the |V| + 1 logits of a network-tail short list of N words."""

    tail = "network"

    def __init__(self, list_size: int, name: str = "network_tail"):
        super().__init__(name=name)
        if list_size < 1:
            raise ValueError(f"list_size={list_size} must be positive.")
        self.list_size = int(list_size)

    def rank_tail(self) -> None:
        """Nothing to build: `top_k` ranks the network's own outputs."""

    def log_prob(self, logits: tf.Tensor, context: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
        """ln P(target | context), (batch,) float64, from the logits (batch, |V| + 1); see `log_prob_of_outputs`."""
        del context
        return self.log_prob_of_outputs([logits], _columns, target)

    def log_prob_of_outputs(self, parts: list[tf.Tensor], output_logits, target: tf.Tensor) -> tf.Tensor:
        """`log_prob` from the output layer's inputs, computing the tail's outputs only for the rows whose
        target is in the tail: a batch's output layer costs N + 1 rows plus its
        tail targets' share of |V| − N, as in training. `parts`: the output layer's inputs, each (batch, ·);
        `output_logits(parts, start, stop)`: the float32 logits of outputs start..stop-1 (stop None: the last)."""
        n = self.list_size
        target = tf.cast(target, tf.int64)
        ln_head = model_lib.log_softmax_at(output_logits(parts, 0, n + 1), tf.minimum(target, n))
        in_tail = tf.where(target >= n)[:, 0]  # (T,)
        tail_logits = self._tail_logits(parts, output_logits, in_tail)
        ln_tail = model_lib.log_softmax_at(tail_logits, tf.gather(target, in_tail) - n)
        ln = ln_head + tf.scatter_nd(in_tail[:, None], ln_tail, tf.shape(ln_head, out_type=tf.int64))
        return tf.cast(ln, tf.float64)

    def _tail_logits(self, parts: list[tf.Tensor], output_logits, rows: tf.Tensor) -> tf.Tensor:
        """The tail's outputs N+1..|V| of the given rows only, (rows, |V| − N) float32."""
        return output_logits([tf.gather(p, rows) for p in parts], self.list_size + 1, None)

    def distribution(self, logits: tf.Tensor, context: tf.Tensor) -> tf.Tensor:
        """P(· | context) over all |V| words, (batch, |V|) float64."""
        del context
        n = self.list_size
        logits = tf.cast(logits, tf.float64)
        head = tf.nn.softmax(logits[:, : n + 1])
        return tf.concat([head[:, :n], head[:, n : n + 1] * tf.nn.softmax(logits[:, n + 1 :])], axis=1)

    def top_k(self, logits: tf.Tensor, context: tf.Tensor, k: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """The k most probable words and their P (ties: the lower id first): (batch, k) float64, (batch, k) int64.
        `distribution`'s top k, from the logits (batch, |V| + 1); see `top_k_of_outputs`."""
        del context
        return self.top_k_of_outputs([logits], _columns, k)

    def top_k_of_outputs(self, parts: list[tf.Tensor], output_logits, k: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """`top_k` from the output layer's inputs (`log_prob_of_outputs`' arguments), computing the tail's
        outputs only for the rows where a tail word can be among the k best.

        `distribution`'s top k without building it (a float64 (batch, |V|) softmax costs more than the
        output layer at batch 64): within the list, and within the tail, P follows the outputs' order, so the
        k best are among the list's k best outputs and the tail's k best. Those 2k are valued in float32 as
        the full softmax's `next_word` is (relative error about 1e-7) and ranked, list words first, so ties
        still go to the lower id. A tail word's P is at most P_head(tail | C): where that is below the k-th
        best list word's P (by more than float32's rounding), the k best are the list's, and the row's tail
        outputs are not computed (k = 1: two rows in three on Brown and GCIDE at N = 4,000; k = 10: one in ten).
        """
        n, k = self.list_size, tf.cast(k, tf.int32)
        head_logits = output_logits(parts, 0, n + 1)  # (batch, N + 1)
        head = tf.math.top_k(head_logits[:, :n], k=tf.minimum(k, n))
        ln_z = tf.reduce_logsumexp(head_logits, axis=1, keepdims=True)  # the head's normalizer
        ln_share = head_logits[:, n : n + 1] - ln_z  # ln P_head(tail | C), (batch, 1)
        kth = tf.reduce_min(head.values, axis=1, keepdims=True) - ln_z  # the k-th list word's ln P; +inf at k = 0
        rows = tf.where((k > n) | (ln_share[:, 0] >= kth[:, 0] - _ROUNDING))[:, 0]  # those a tail word may enter
        tail_logits = self._tail_logits(parts, output_logits, rows)
        tail = tf.math.top_k(tail_logits, k=tf.minimum(k, tf.shape(tail_logits)[1]))
        ln_tail = tf.gather(ln_share, rows) - tf.reduce_logsumexp(tail_logits, axis=1, keepdims=True)
        shape = tf.stack([tf.shape(head_logits, out_type=tf.int64)[0], tf.shape(tail.values, out_type=tf.int64)[1]])
        tail_values = tf.tensor_scatter_nd_update(  # rows without the tail: -inf, never ranked (k ≤ N there)
            tf.fill(shape, tf.constant(-float("inf"), tail.values.dtype)), rows[:, None], tail.values + ln_tail
        )
        tail_ids = tf.scatter_nd(rows[:, None], tail.indices, shape)
        ln_p = tf.cast(tf.concat([head.values - ln_z, tail_values], 1), tf.float64)
        ids = tf.concat([head.indices, n + tail_ids], axis=1)
        top = tf.math.top_k(ln_p, k=k)
        return tf.exp(top.values), tf.cast(tf.gather(ids, top.indices, batch_dims=1), tf.int64)

    def sample(self, logits: tf.Tensor, context: tf.Tensor, seed: tf.Tensor, banned=None, ban=True) -> tf.Tensor:
        """One word per row drawn from `distribution`, (batch,) int64, from the logits (batch, |V| + 1); see
        `sample_of_outputs`."""
        del context
        return self.sample_of_outputs([logits], _columns, seed, banned, ban)

    def sample_of_outputs(self, parts: list[tf.Tensor], output_logits, seed: tf.Tensor, banned=None, ban=True):
        """`sample` from the output layer's inputs (`log_prob_of_outputs`' arguments): an output of the head
        is drawn, and only the rows that drew the tail compute the tail's outputs and draw one of its words
        (about one row in eight on Brown and GCIDE at N = 4,000). `seed`: a stateless seed pair. `banned`: a
        list word never drawn while `ban` holds (the others keep their proportions)."""
        n, seed = self.list_size, tf.cast(seed, tf.int64)
        head = tf.nn.log_softmax(tf.cast(output_logits(parts, 0, n + 1), tf.float64))
        if banned is not None:
            if not 0 <= banned < n:
                raise ValueError(f"only a list word can be banned from sampling; {banned} is not below N = {n}.")
            shut = (tf.range(n + 1) == banned) & tf.cast(ban, tf.bool)
            head = tf.where(shut[None, :], tf.constant(-1e30, tf.float64), head)
        pick = tf.random.stateless_categorical(head, 1, seed=tf.random.experimental.stateless_fold_in(seed, 0))[:, 0]
        rows = tf.where(pick == n)[:, 0]
        tail_logits = tf.cast(self._tail_logits(parts, output_logits, rows), tf.float64)
        seed_tail = tf.random.experimental.stateless_fold_in(seed, 1)
        tail_word = n + tf.random.stateless_categorical(tail_logits, 1, seed=seed_tail)[:, 0]
        return tf.tensor_scatter_nd_update(pick, rows[:, None], tail_word)


# How far float32's rounding may lift a tail word's computed ln P above ln P_head(tail | C) (a few ulps of
# values of at most tens of nats); `top_k_of_outputs` skips a row's tail only below that margin.
_ROUNDING = 1e-3


def _columns(parts: list[tf.Tensor], start: int, stop: int | None) -> tf.Tensor:
    """`output_logits` when the one part is the logits themselves."""
    return parts[0][:, start:stop]
