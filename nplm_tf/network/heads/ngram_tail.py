"""A short list whose tail a Kneser-Ney n-gram scores: the class tail and the back-off tail.

With L the N most frequent words (ids 0..N-1), T the rest, P_ng the tail's n-gram and m(C) = Σ_{j∈L} P_ng(j | C):

- `class` (Goodfellow et al. eq. 12.10, its "slight modification"): N + 1 outputs, the last "the word is in
  the tail"; P(i | C) = P_nn(i | C) for i in L, and P_nn(tail | C) · P_ng(i | C) / (1 − m(C)) for i in T.
  Training: a target in the tail is output N.
- `backoff` (Schwenk 2007): N outputs, P(i | C) = P_nn(i | C) · m(C) for i in L, and P_ng(i | C) for i in T.
  Training learns P(w | C, w ∈ L): windows whose target is in the tail carry no loss.

The graph code over the n-gram's tables is `tail_tables.ShortListTail`; the NumPy path reads the same model
(`kneser_ney.KneserNey`). A head of this family only says what its network's own distribution q over its
outputs is (`network_probs` and its kin), and whether its last output stands for the tail (`tail_output`).
"""

from __future__ import annotations

import numpy as np

from nplm_tf import engines
from nplm_tf.network.heads import base, tail_ranking
from nplm_tf.network.heads.base import tf

_BELOW_ONE = 1.0 - 2.0**-53  # m(C) at most this in 1 − m(C): finite where the list holds every word


class NgramTail(base.Head):
    """What the class and back-off tails share; a subclass says what q is."""

    needs_ngram = True
    ranks_densely = False  # ranks the list and the tail's candidates, never all of |V|
    lazy_updates = True
    tail_output = True  # output N is "the word is in the tail"

    def __init__(self, list_size: int, vocab_size: int, ngram=None, self_normalize: float = 0.0):
        super().__init__(list_size, vocab_size, ngram, self_normalize)
        self._tables = self._numpy_tables = None

    def attach_ngram(self, ngram) -> None:
        super().attach_ngram(ngram)
        self._tables = self._numpy_tables = None  # built from the model on first use

    def output_size(self) -> int:
        return self.list_size + 1 if self.tail_output else self.list_size

    # -------------------------------------------- the network's own q and the tail, either engine --

    def network_probs(self, logits, engine=engines.TENSORFLOW):
        """q over the outputs, (batch, outputs) float64."""
        return engine.to64(engine.softmax(logits))

    def network_log_probs(self, logits, engine=engines.TENSORFLOW):
        """ln q over the outputs, (batch, outputs) float64, computed in float64 (sampling)."""
        return engine.log_softmax(engine.to64(logits))

    def network_log_prob_at(self, logits, column, engine=engines.TENSORFLOW):
        """ln q(column) per row, (batch,) float64."""
        return engine.to64(engine.log_softmax_at(logits, column))

    def column_of(self, target, engine=engines.TENSORFLOW):
        """The output whose q a target's ln P reads: its own in the list; in the tail, the tail output (the
        back-off tail: any, output 0, whose value is not used)."""
        return engine.where(target < self.list_size, target, self.list_size if self.tail_output else 0)

    def combine_log(self, ln_nn, ln_ng, mass, in_list, engine=engines.TENSORFLOW):
        """ln P(target | C) from ln q(target's column), ln P_ng(target | C) and the n-gram's list mass m(C)
        (the module's docstring)."""
        if self.tail_output:  # m(C) = 1 only when the list holds every word: no target is then in the tail
            return engine.where(in_list, ln_nn, ln_nn + ln_ng - engine.log1p(-engine.minimum(mass, _BELOW_ONE)))
        return engine.where(in_list, ln_nn + engine.log(mass), ln_ng)

    def list_and_tail_scale(self, p_nn, mass, engine=engines.TENSORFLOW):
        """(P(i | C) of the list words (batch, N), and the factor (batch,) that turns a tail word's P_ng into
        its P(i | C)), from q (batch, N [+ 1]) and m(C), both float64."""
        n = self.list_size
        if self.tail_output:  # (no tail word to scale when m(C) = 1)
            return p_nn[:, :n], p_nn[:, n] / (1.0 - engine.minimum(mass, _BELOW_ONE))
        return p_nn * mass[:, None], engine.ones_like(mass)

    # ----------------------------------------------------------------------- graphs --

    def ranking(self, engine):
        """The tail's tables in `engine` (`tail_ranking.TailRanking`): the graph's, or NumPy's (built on first
        use and kept)."""
        if engine is engines.TENSORFLOW:
            return self.graph_state()
        if self._numpy_tables is None:
            if self.ngram is None:
                raise ValueError(f"the {self.name} tail needs its Kneser-Ney model to score.")
            self._numpy_tables = tail_ranking.NumpyTail(self.ngram, self.list_size, self)
        return self._numpy_tables

    def graph_state(self):
        if self._tables is None:
            if self.ngram is None:
                raise ValueError(f"the {self.name} tail needs its Kneser-Ney model to score.")
            # deferred: TensorFlow loads when this runs, not with the module
            from nplm_tf.network.heads import tail_tables

            self._tables = tail_tables.ShortListTail(self.ngram, self.list_size, self)
        return self._tables

    def prepare_serving(self) -> None:
        self.graph_state().rank_tail()

    def log_prob(self, outputs, context, target, engine=engines.TENSORFLOW):
        """In either engine, from the n-gram's tables (`tail_ranking.TailRanking`)."""
        return self.ranking(engine).log_prob(base.logits_of(outputs), context, target)

    def distribution(self, outputs, context, engine=engines.TENSORFLOW):
        return self.ranking(engine).distribution(base.logits_of(outputs), context)

    def top_k(self, outputs, context, k, engine=engines.TENSORFLOW):
        return self.ranking(engine).top_k(base.logits_of(outputs), context, k)

    def samples_exactly(self, unk_id: int) -> bool:
        return self.can_ban(unk_id)

    def can_ban(self, word: int) -> bool:
        return word < self.list_size  # a list word

    def sample(self, outputs, context, seed, banned=None, ban=True, engine=engines.TENSORFLOW):
        return self.ranking(engine).sample(base.logits_of(outputs), context, seed, banned, ban)


class ClassTail(NgramTail):
    name = "class"

    def initial_bias(self, counts) -> np.ndarray:
        counts, n = base.unigram(counts), self.list_size
        return base.log_frequencies(np.append(counts[:n], counts[n:].sum())).astype(np.float32)

    def _outputs(self, targets):
        return tf.minimum(tf.cast(tf.reshape(targets, [-1]), tf.int32), self.list_size)  # every tail word is N

    def nll(self, targets, logits):
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.network.heads import ops

        return ops.token_nll(self._outputs(targets), logits)

    def training_losses(self, layer, context, target):
        """The loss with b added inside the softmax's gradient pass (`ops.softmax_training_losses`), and R(θ)."""
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.network.heads import ops

        return ops.softmax_training_losses(layer, context, self._outputs(target))


class BackoffTail(NgramTail):
    name = "backoff"
    tail_output = False

    def initial_bias(self, counts) -> np.ndarray:
        return base.log_frequencies(base.unigram(counts)[: self.list_size]).astype(np.float32)

    def _outputs(self, targets):
        """Each example's output and weight: a tail word's example has none (weight 0; output 0 stands in)."""
        targets = tf.cast(tf.reshape(targets, [-1]), tf.int32)
        in_list = targets < self.list_size
        return tf.where(in_list, targets, 0), tf.cast(in_list, tf.float32)

    def nll(self, targets, logits):
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.network.heads import ops

        outputs, weight = self._outputs(targets)
        return ops.token_nll(outputs, logits) * weight

    def training_losses(self, layer, context, target):
        """The loss with b added inside the softmax's gradient pass (`ops.softmax_training_losses`), and R(θ)."""
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.network.heads import ops

        return ops.softmax_training_losses(layer, context, *self._outputs(target))
