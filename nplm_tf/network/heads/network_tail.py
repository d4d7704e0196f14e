"""A short list whose tail is scored by the network itself: exact probabilities over the whole vocabulary.

With L the N most frequent words (ids 0..N-1) and T the rest, the network has |V| + 1 outputs: the list's N,
then "the word is in the tail" (output N), then the tail's words (output N + 1 + i - N for word i ≥ N). Two
softmaxes share its hidden layer:

    P(i | C) = P_head(i | C) for i in L,   P_head(tail | C) · P_tail(i | C) for i in T,

with P_head the softmax of outputs 0..N and P_tail that of outputs N+1..|V|. It is the class tail
(Goodfellow et al. eq. 12.10) with the n-gram's P_ng(i | C) / (1 − m(C)) replaced by the network's own
P_tail(i | C): a two-level softmax whose first level is the short list (the adaptive softmax of Grave et al.
2017, with one tail cluster at full width). Training and scoring compute the tail's softmax only for the
examples whose target is in the tail (`training_losses`, `log_prob`), which is where it is cheaper than the
full softmax. Ranking and sampling compute the tail's outputs only for the rows that can need them (`top_k`,
`sample`); the dense `distribution` computes them all. Contexts are not read (the network has seen them).
"""

from __future__ import annotations

import numpy as np

from nplm_tf import engines
from nplm_tf.network.heads import base
from nplm_tf.network.heads.base import tf

# How far float32's rounding may lift a tail word's computed ln P above ln P_head(tail | C) (a few ulps of
# values of at most tens of nats); `top_k` skips a row's tail only below that margin.
_ROUNDING = 1e-3


class NetworkTail(base.Head):
    """Exact P(w | C) from the |V| + 1 outputs of a network-tail short list of N words."""

    name = "network"
    output_rows = True  # training reads the tail's rows for its tail targets only
    block_bounds_after_list = True

    def output_size(self) -> int:
        return self.vocab_size + 1

    def trained_width(self, counts) -> float:
        """N + 1, and the tail's |V| − N for the share of train tokens in the tail."""
        counts, n = np.asarray(counts, np.float64), self.list_size
        return n + 1 + counts[n:].sum() / counts.sum() * (self.vocab_size - n)

    def initial_bias(self, counts) -> np.ndarray:
        """The class tail's (the list, then the tail's total), then the tail words' frequencies in the tail."""
        counts, n = base.unigram(counts), self.list_size
        head = np.append(counts[:n], counts[n:].sum())
        return np.append(base.log_frequencies(head), base.log_frequencies(counts[n:])).astype(np.float32)

    def nll(self, targets, logits):
        """The exact −ln P from all |V| + 1 outputs (what `evaluate` reports; training runs `training_losses`)."""
        targets = tf.cast(tf.reshape(targets, [-1]), tf.int32)
        return -tf.cast(self.log_prob(base.Outputs(logits=logits), None, targets), tf.float32)

    def training_losses(self, layer, context, target):
        """The head's softmax (N + 1 outputs) for every example, the tail's (|V| − N outputs) only for the
        examples whose target is in the tail, so a batch's output layer costs (N + 1 + its tail targets' share
        of |V| − N) rows of the full softmax's |V|. R(θ) decays every output row, as the full softmax does.
        The output matmuls are float32, as a sampled objective's are."""
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.network import equation
        from nplm_tf.network.heads import ops

        n = self.list_size
        z, rows, regularization = layer.output_inputs(context, training=True)  # (B, D), [(|V| + 1, ·)] float32
        output = rows[0] if len(rows) == 1 else tf.concat(rows, axis=1)  # (|V| + 1, D)
        head_rows, tail_rows, square_sum = ops.split_rows(output, n + 1)
        target = tf.cast(tf.reshape(target, [-1]), tf.int32)
        head = equation.row_logits(z, head_rows, layer.b[: n + 1])
        nll = ops.token_nll(tf.minimum(target, n), head)  # (B,)
        in_tail = tf.where(target >= n)  # (T, 1)
        tail_logits = equation.row_logits(tf.gather_nd(z, in_tail), tail_rows, layer.b[n + 1 :])
        tail_nll = ops.token_nll(tf.gather_nd(target, in_tail) - n, tail_logits)  # (T,)
        nll += tf.scatter_nd(in_tail, tail_nll, tf.shape(nll, out_type=tf.int64))
        regularization += layer.weight_decay * square_sum
        return nll, regularization

    # ----------------------------------------------------------------------- graphs --

    def log_prob(self, outputs, context, target, engine=engines.TENSORFLOW):
        """ln P(target | context), computing the tail's outputs only for the rows whose target is in the tail:
        a batch's output layer costs N + 1 rows plus its tail targets' share of |V| − N, as in training."""
        outputs = base.as_outputs(outputs, engine)
        n, target = self.list_size, engine.int64(target)
        ln_head = engine.log_softmax_at(outputs.logits(0, n + 1), engine.minimum(target, n))
        in_tail = engine.nonzero(target >= n)
        tail_logits = outputs.rows(in_tail).logits(n + 1, None)
        ln_tail = engine.log_softmax_at(tail_logits, engine.gather(target, in_tail) - n)
        return engine.to64(engine.add_at(ln_head, in_tail, ln_tail))

    def distribution(self, outputs, context, engine=engines.TENSORFLOW):
        logits = engine.to64(base.as_outputs(outputs, engine).logits())
        n = self.list_size
        head = engine.softmax(logits[:, : n + 1])
        return engine.concat([head[:, :n], head[:, n : n + 1] * engine.softmax(logits[:, n + 1 :])], axis=1)

    def top_k(self, outputs, context, k, engine=engines.TENSORFLOW):
        """`distribution`'s top k without building it (a float64 (batch, |V|) softmax costs more than the
        output layer at batch 64): within the list, and within the tail, P follows the outputs' order, so the
        k best are among the list's k best outputs and the tail's k best. Those 2k are valued in float32 as
        the full softmax's are (relative error about 1e-7) and ranked, list words first, so ties still go to
        the lower id. A tail word's P is at most P_head(tail | C): where that is below the k-th best list
        word's P (by more than float32's rounding), the k best are the list's, and the row's tail outputs are
        not computed.
        """
        e, n = engine, self.list_size
        outputs = base.as_outputs(outputs, e)
        head_logits = outputs.logits(0, n + 1)  # (batch, N + 1)
        head_values, head_ids = e.top_k(head_logits[:, :n], e.minimum(k, n))
        ln_z = e.logsumexp(head_logits)  # the head's normalizer, (batch, 1)
        ln_share = head_logits[:, n : n + 1] - ln_z  # ln P_head(tail | C), (batch, 1)
        kth = e.row_min(head_values) - ln_z  # the k-th list word's ln P; +inf at k = 0
        rows = e.nonzero((k > n) | (ln_share[:, 0] >= kth[:, 0] - _ROUNDING))  # those a tail word may enter
        tail_logits = outputs.rows(rows).logits(n + 1, None)
        tail_values, tail_ids = e.top_k(tail_logits, e.minimum(k, e.shape(tail_logits)[1]))
        ln_tail = e.gather(ln_share, rows) - e.logsumexp(tail_logits)
        shape = [e.rows(head_logits), e.shape(tail_values)[1]]
        # rows without the tail: -inf, never ranked (k ≤ N there)
        tail_values = e.scatter_rows(e.fill(shape, -np.inf, tail_values.dtype), rows, tail_values + ln_tail)
        tail_ids = e.scatter_rows(e.fill(shape, 0, "int64"), rows, tail_ids)
        ln_p = e.to64(e.concat([head_values - ln_z, tail_values], axis=1))
        ids = e.concat([head_ids, n + tail_ids], axis=1)
        top_values, top_ids = e.top_k(ln_p, k)
        return e.exp(top_values), e.int64(e.take_along_rows(ids, top_ids))

    def samples_exactly(self, unk_id: int) -> bool:
        return self.can_ban(unk_id)

    def can_ban(self, word: int) -> bool:
        return word < self.list_size  # a list word

    def sample(self, outputs, context, seed, banned=None, ban=True, engine=engines.TENSORFLOW):
        """An output of the head is drawn, and only the rows that drew the tail compute the tail's outputs and
        draw one of its words."""
        e, n = engine, self.list_size
        outputs = base.as_outputs(outputs, e)
        head = e.log_softmax(e.to64(outputs.logits(0, n + 1)))
        if banned is not None:
            if not 0 <= banned < n:
                raise ValueError(f"only a list word can be banned from sampling; {banned} is not below N = {n}.")
            shut = (e.arange(n + 1) == banned) & e.as_bool(ban)
            head = e.where(~shut[None, :], head, -1e30)
        pick = e.categorical(head, e.fold_in(seed, 0))
        rows = e.nonzero(pick == n)
        tail_logits = e.to64(outputs.rows(rows).logits(n + 1, None))
        tail_word = n + e.categorical(tail_logits, e.fold_in(seed, 1))
        return e.scatter_rows(pick, rows, tail_word)
