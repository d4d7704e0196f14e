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

from nplm_tf.baselines import kn_short_list
from nplm_tf.network.heads import base, np_ops
from nplm_tf.network.heads.base import tf


class NgramTail(base.Head):
    """What the class and back-off tails share; a subclass says what q is."""

    needs_ngram = True
    ranks_densely = False  # ranks the list and the tail's candidates, never all of |V|
    lazy_updates = True
    tail_output = True  # output N is "the word is in the tail"

    def __init__(self, list_size: int, vocab_size: int, ngram=None, self_normalize: float = 0.0):
        super().__init__(list_size, vocab_size, ngram, self_normalize)
        self._tables = None
        self._masses = None

    def attach_ngram(self, ngram) -> None:
        super().attach_ngram(ngram)
        self._tables = self._masses = None  # built from the model on first use

    def output_size(self) -> int:
        return self.list_size + 1 if self.tail_output else self.list_size

    # ------------------------------------------------------- the network's own q, graphs --

    def network_probs(self, logits):
        """q over the outputs, (batch, outputs) float64 (float32's softmax, then cast)."""
        return tf.cast(tf.nn.softmax(logits), tf.float64)

    def network_log_probs(self, logits):
        """ln q over the outputs, (batch, outputs) float64, computed in float64 (sampling)."""
        return tf.nn.log_softmax(tf.cast(logits, tf.float64))

    def network_log_prob_at(self, logits, column):
        """ln q(column) per row, (batch,) float64."""
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.network.heads import ops

        return tf.cast(ops.log_softmax_at(logits, column), tf.float64)

    # ----------------------------------------------------------------------- graphs --

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

    def log_prob(self, outputs, context, target):
        return self.graph_state().log_prob(base.logits_of(outputs), context, target)

    def distribution(self, outputs, context):
        return self.graph_state().distribution(base.logits_of(outputs), context)

    def top_k(self, outputs, context, k):
        return self.graph_state().top_k(base.logits_of(outputs), context, k)

    def samples_exactly(self, unk_id: int) -> bool:
        return unk_id < self.list_size

    def sample(self, outputs, context, seed, banned=None, ban=True):
        return self.graph_state().sample(base.logits_of(outputs), context, seed, banned, ban)

    # ------------------------------------------------------------------------ NumPy --

    def np_network_probs(self, logits: np.ndarray) -> np.ndarray:
        return np_ops.softmax(logits)

    def np_network_log_prob_at(self, logits: np.ndarray, column: np.ndarray) -> np.ndarray:
        return np_ops.log_softmax_at(logits, column)

    def _list_mass(self, arrays) -> np.ndarray:
        if self._masses is None:
            base_mass, deltas, _ = kn_short_list.short_list_tables(self.ngram, self.list_size)
            self._masses = (base_mass, deltas)
        return kn_short_list.token_list_masses(self.ngram, arrays, *self._masses)

    def np_network_log_probs(self, outputs, target):
        """ln q of each target's output (a tail word's: the tail output, or any for the back-off tail)."""
        n = self.list_size
        column = np.where(target < n, target, n) if self.tail_output else np.minimum(target, n - 1)
        return self.np_network_log_prob_at(outputs.logits(), column)

    def np_finish(self, ln_nn, target, arrays=None):
        in_list = target < self.list_size
        mass = self._list_mass(arrays)
        ln_ng = np.log(self.ngram.token_probabilities(arrays))
        if self.tail_output:
            return np.where(in_list, ln_nn, ln_nn + ln_ng - np.log1p(-mass))
        return np.where(in_list, ln_nn + np.log(mass), ln_ng)

    def np_distribution(self, outputs, context):
        n = self.list_size
        p_nn = self.np_network_probs(outputs.logits())
        p_ng = np.stack([self.ngram.distribution(self._ngram_context(row)) for row in np.asarray(context)])
        mass = p_ng[:, :n].sum(axis=1)
        if self.tail_output:
            return np.concatenate([p_nn[:, :n], p_ng[:, n:] * (p_nn[:, n] / (1.0 - mass))[:, None]], axis=1)
        return np.concatenate([p_nn * mass[:, None], p_ng[:, n:]], axis=1)

    def _ngram_context(self, row) -> list[int]:
        """A network context as the n-gram reads it: its words after the last `<s>` pad (id |V|), with `<s>`
        itself standing for the start of the line (`KneserNey.distribution`'s convention)."""
        row = [int(w) for w in row]
        if self.vocab_size in row:
            last = len(row) - row[::-1].index(self.vocab_size) - 1
            row = [self.ngram.bos_id] + row[last + 1 :]
        return row


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
