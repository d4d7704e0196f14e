"""What every output head is: the interface, and the network's outputs as a head reads them.

A head turns the network's output layer into P(w | C) over the whole vocabulary: it owns its output width and
initial biases, the loss it is trained on, the exact ln P of given targets, the full distribution (mixtures),
the top k over the vocabulary and sampling. `log_prob`, `distribution`, `top_k` and `sample` are written once for
both engines (`nplm_tf.engines`: TensorFlow's graphs in training, evaluation and the SavedModel; NumPy's in
`inference.network`, which runs without TensorFlow, with `engines.NUMPY`); a short list's n-gram tail reads
the n-gram model's tables in each engine. The methods read the output layer through `Outputs`, which
computes only the output rows they ask for.

A head module imports no TensorFlow: `tf` here loads it on first use, so the NumPy path of a head never does.
Contexts are (batch, c) int ids, oldest first, `<s>`-padded (id |V|).
"""

from __future__ import annotations

import importlib

import numpy as np

from nplm_tf import engines


class _TensorFlow:
    """`tensorflow`, imported when an attribute of it is first read."""

    def __getattr__(self, name):
        return getattr(importlib.import_module("tensorflow"), name)


tf = _TensorFlow()


class Outputs:
    """The output layer of a batch, computed as far as a head asks: `logits(start, stop)` gives y's columns
    start..stop-1 (float32, (batch, stop - start)), `rows(i)` the same for some rows only.

    Args:
      parts: the output layer's inputs, [tanh(d + H·x)] and x when W exists (each (batch, ·)).
      logits_of: `logits_of(parts, start, stop)` -> those columns of y (stop None: the last).
      logits: instead of the two above, y itself (batch, outputs).
      take: how rows are taken from an array (`tf.gather`, or NumPy's indexing).
    """

    def __init__(self, parts=None, logits_of=None, logits=None, take=None):
        self.parts, self.logits_of, self.full = parts, logits_of, logits
        self.take = take or (lambda array, rows: tf.gather(array, rows))

    @classmethod
    def numpy(cls, parts, logits_of) -> Outputs:
        return cls(parts, logits_of, take=lambda array, rows: array[rows])

    def logits(self, start: int = 0, stop: int | None = None):
        if self.full is not None:
            return self.full if start == 0 and stop is None else self.full[:, start:stop]
        return self.logits_of(self.parts, start, stop)

    def rows(self, rows) -> Outputs:
        if self.full is not None:
            return Outputs(logits=self.take(self.full, rows), take=self.take)
        return Outputs([self.take(p, rows) for p in self.parts], self.logits_of, take=self.take)


class Head:
    """One output distribution over the vocabulary (see the module docstring).

    Args:
      list_size: N, the short list's words (ids 0..N-1); the full softmax ignores it.
      vocab_size: |V|.
      ngram: the Kneser-Ney model of a short list's n-gram tail (`needs_ngram`); None to build a model that
        trains, or scores nothing beyond its own outputs.
    """

    name = ""
    needs_ngram = False  # a Kneser-Ney model scores the tail
    output_rows = False  # the output weights stored a row per output: training reads some rows only
    lazy_updates = False  # Adam updates only the rows a batch uses (a large-vocabulary mode)
    ranks_densely = True  # `top_k` holds a (batch, |V|) tensor (the server ranks such heads in chunks)
    block_bounds_after_list = False  # the server holds the output weights in two column blocks: 0..N, N+1..
    # why the nplm format (one softmax over every word) cannot hold the head, one sentence naming what to drop
    nplm_refusal: str | None = "its output is not one softmax over every word, all the nplm format can hold."

    sampled = False  # training estimates the loss by sampling (`--loss`; the full softmax's); scored exactly

    def __init__(self, list_size: int, vocab_size: int, ngram=None, self_normalize: float = 0.0):
        self.list_size, self.vocab_size, self.ngram = int(list_size), int(vocab_size), ngram
        self.self_normalize = float(self_normalize)  # α of training's α·(ln Z)² (the full softmax's: `ops`)

    @classmethod
    def from_config(cls, config, vocab_size: int, ngram=None) -> Head:
        """The head of a config (`heads.make`): its short list and self-normalization."""
        return cls(config.shortlist, vocab_size, ngram, config.self_normalize)

    def attach_ngram(self, ngram) -> None:
        """Gives a head built to train (`needs_ngram`) the Kneser-Ney model it scores its tail with."""
        self.ngram = ngram

    @property
    def stores_rows(self) -> bool:
        """Whether the output weights are stored a row per output: training reads some rows only (a sampled
        loss, or a head that trains on part of its outputs)."""
        return self.sampled or self.output_rows

    @property
    def updates_lazily(self) -> bool:
        """Whether Adam updates only the rows a batch uses (`optimizers.FusedAdam`'s `lazy`)."""
        return self.sampled or self.lazy_updates

    # ------------------------------------------------------------- shape and training --

    def output_size(self) -> int:
        raise NotImplementedError

    def trained_width(self, counts) -> float:
        """Output rows a train token costs on average (`benchmarks.throughput`'s FLOP count)."""
        return float(self.output_size())

    def initial_bias(self, counts) -> np.ndarray:
        """b at the start of training: the outputs' train unigram model (float32, (outputs,))."""
        raise NotImplementedError

    def nll(self, targets, logits):
        """−ln P_nn(target | context) per example (batch,) float32 that training minimizes, from the logits."""
        raise NotImplementedError

    def training_losses(self, layer, context, target):
        """(−ln P per example, the R(θ) of the weights it used) when the head trains on part of the output
        layer; None: training computes the whole layer and `nll` (Keras's own step)."""
        return None

    # ----------------------------------------------------------------------- graphs --

    def graph_state(self):
        """The tf.Module holding the head's tables (a serving graph tracks it), or None."""
        return None

    def prepare_serving(self) -> None:
        """Builds what `top_k` and `sample` read (eagerly, before a serving graph is traced)."""

    def log_prob(self, outputs: Outputs, context, target, engine=engines.TENSORFLOW):
        """ln P(target | context), (batch,) float64, in either engine (`nplm_tf.engines`)."""
        raise NotImplementedError

    def distribution(self, outputs: Outputs, context, engine=engines.TENSORFLOW):
        """P(· | context) over all |V| words, (batch, |V|) float64, in either engine."""
        raise NotImplementedError

    def top_k(self, outputs: Outputs, context, k, engine=engines.TENSORFLOW):
        """The k most probable words over all |V| and their P, most probable first (ties: the lower id):
        (batch, k) float64, (batch, k) int64, in either engine. This default ranks `distribution`."""
        return engine.top_k(self.distribution(outputs, context, engine), k)

    def samples_exactly(self, unk_id: int) -> bool:
        """Whether `sample` draws from the distribution without building it, with `unk_id` bannable (the
        server then calls it at temperature 1)."""
        return False

    def can_ban(self, word: int) -> bool:
        """Whether `sample` can leave `word` out."""
        return True

    def sample(self, outputs: Outputs, context, seed, banned=None, ban=True, engine=engines.TENSORFLOW):
        """One word per row drawn from `distribution`, (batch,) int64, in either engine (each draws with its
        own stateless generator: the same seed gives the same words in one engine). `seed`: a seed pair;
        `banned`: a word never drawn while `ban` holds (the others keep their proportions). This default
        builds the distribution."""
        p = self.distribution(outputs, context, engine)
        log_p = engine.log(engine.maximum(p, 1e-300))
        if banned is not None:
            shut = (engine.arange(self.vocab_size) == banned) & engine.as_bool(ban)
            log_p = engine.where(~shut[None, :], log_p, -1e30)
        return engine.categorical(log_p, engine.fold_in(seed, 0))

    # ------------------------------------------------------------------------ NumPy --

    def np_unnormalized(self, outputs: Outputs):
        """(y (rows, |V|) float32, ln Z (rows,) float64) when ln P(w | C) = y_w − ln Z (the full softmax),
        else None."""
        return None


def unigram(counts) -> np.ndarray:
    """The train counts of the words plus one (`<unk>` may count 0), float64."""
    return np.asarray(counts, np.float64) + 1.0


def log_frequencies(counts: np.ndarray) -> np.ndarray:
    """ln of counts normalized to sum to one."""
    return np.log(counts / counts.sum())


def as_outputs(outputs, engine=engines.TENSORFLOW) -> Outputs:
    """`outputs` itself, or the logits (of `engine`) given in its place as `Outputs`."""
    return outputs if isinstance(outputs, Outputs) else Outputs(logits=outputs, take=engine.gather)


def logits_of(outputs):
    """The whole output layer, from `Outputs` or the logits themselves."""
    return outputs.logits() if isinstance(outputs, Outputs) else outputs
