"""The tables and graph code of a short list's n-gram tail: exact probabilities over the whole vocabulary.

With L the N most frequent words (ids 0..N-1), T the rest, P_ng a Kneser-Ney model and
m(C) = Σ_{j∈L} P_ng(j | C) (Goodfellow et al. §12.4.3.1; Schwenk 2007), a head whose network has a "tail"
output (`head.tail_output`: the class and sigmoid tails, `ngram_tail`, `sigmoid`) gives

    P(i | C) = q(i | C) for i in L, and q(tail | C) · P_ng(i | C) / (1 − m(C)) for i in T,

and one without it (the back-off tail) P(i | C) = q(i | C) · m(C) for i in L, and P_ng(i | C) for i in T, with
q the network's distribution over its outputs (`head.network_probs`). Both sum to one over V. m(C) is exact
and cheap: it recurses through the context's suffixes (`kn_short_list.short_list_tables`), touching only the
list words seen after each, never all of L. m(C), the top k and sampling are `tail_ranking.TailRanking`'s,
written once for both engines; here they run in core TensorFlow ops over the tables as variables, in
float64, so the same module scores in evaluation and in the SavedModel. Contexts are (batch, c) int64 ids,
oldest first, `<s>`-padded.
"""

from __future__ import annotations

import types

import numpy as np
import tensorflow as tf

from nplm_tf import engines
from nplm_tf.baselines import kn_short_list, ngram_graph
from nplm_tf.baselines import kneser_ney as kn
from nplm_tf.network.heads import tail_ranking


def id_table(values: np.ndarray, bound: int) -> tf.Variable:
    """Word ids or offsets (all in [-1, bound]) as a table: int32 when `bound` fits (half the bytes in an
    export), else int64. Graph code keeps what it reads in the table's type and casts its result once."""
    return tf.Variable(values.astype(np.int32 if bound <= np.iinfo(np.int32).max else np.int64), trainable=False)


class ShortListTail(tf.Module, tail_ranking.TailRanking):
    """Exact P(w | C) from a short-list network's logits and the Kneser-Ney model of its tail.

    Args:
      ngram: the tail's `KneserNey` model, on the network's vocabulary.
      list_size: N.
      head: the head (`ngram_tail.NgramTail`): the network's own distribution q over its outputs
        (`network_probs`, `network_log_probs`, `network_log_prob_at`) and whether its last output is the tail
        (`tail_output`).
    """

    engine = engines.TENSORFLOW

    def __init__(self, ngram: kn.KneserNey, list_size: int, head, name: str = "shortlist_tail"):
        super().__init__(name=name)
        if not isinstance(ngram, kn.KneserNey):
            raise kn.NgramError("a short list's tail needs a Kneser-Ney model (nplm_tf.ngram --smoothing=kneser_ney).")
        if not 0 < list_size <= ngram.vocab_size:
            raise kn.NgramError(f"list_size={list_size} must be in [1, |V| = {ngram.vocab_size}].")
        self.list_size, self.vocab_size = int(list_size), ngram.vocab_size
        self.owner = head  # plain Python: not tracked by tf.Module
        self.ngram = ngram_graph.ServingKneserNey(ngram, name="tail_ngram")
        base, deltas, discounted = kn_short_list.short_list_tables(ngram, list_size)
        self.base_mass = float(base)
        self.deltas = [tf.Variable(d, dtype=tf.float64, trainable=False) for d in deltas]
        # the model and its tail's p̃, for `rank_tail` (a namespace, so tf.Module does not track them)
        self._model = types.SimpleNamespace(model=ngram, discounted=discounted)
        self.ranked_words = None

    def rank_tail(self) -> None:
        """Builds what `top_k` and `sample` read (`tail_ranking.ranked_tables`), as variables: word ids and
        offsets in `id_table`s."""
        if self.ranked_words is not None:
            return
        tables = tail_ranking.ranked_tables(self._model.model, self.list_size, self._model.discounted)
        self._model.model = self._model.discounted = None  # in the tables now
        total = int(tables["starts"][-1])
        self.head = id_table(tables["head"], self.vocab_size)
        self.starts = id_table(tables["starts"], total)
        self.ranked_words = id_table(tables["ranked_words"], self.vocab_size)
        self.context_offsets = tf.constant(tables["context_offsets"])
        for name in ("head_probs", "head_cumulative", "ranked_probs", "ranked_cumulative"):
            setattr(self, name, tf.Variable(tables[name], dtype=tf.float64, trainable=False))
