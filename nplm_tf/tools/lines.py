"""Exact scores of many lines of text at once, by the network, its mixture with an n-gram, or the n-gram alone.

By default the network is computed in NumPy from the saved weights (`nplm_tf.inference.network`: float32,
no TensorFlow, a start in a fraction of a second); given a precision, it runs in TensorFlow through the
training pipeline (`tf.strings.split`, the vocabulary, `<s>` padding, windows that never cross a line).
Either way each line predicts its words and `</s>`. A blank line is an empty sentence: it predicts `</s>` at
the start of a line, as in KenLM's `query` and the SavedModel's `score` (the corpus readers skip blank lines
instead: they are no unit of text).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time

import numpy as np

from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import mixture as mixture_lib
from nplm_tf.baselines import network_mixture
from nplm_tf.baselines.ngram_arrays import TokenArrays
from nplm_tf.core import run_dir
from nplm_tf.inference.network import NumpyNetwork
from nplm_tf.network import loading
from nplm_tf.tools import fit_cache
from nplm_tf.training.data import eval_dataset
from pipelines import corpus as corpus_lib
from pipelines import corpus_flags

LOG10 = math.log(10)
MODES = ("network", "mixture", "ngram")


@dataclasses.dataclass(frozen=True)
class LineScore:
    words: list[str]  # the line's tokens, then </s>
    ids: np.ndarray  # their vocabulary ids (<unk> = 1)
    log10: np.ndarray  # log10 P of each
    lengths: np.ndarray | None = None  # the n-gram alone: the longest n-gram matched at each, as KenLM's

    @property
    def total(self) -> float:
        return float(self.log10.sum())


def saved_mixture_ngram(model_dir: str) -> str | None:
    """The n-gram directory of MODEL_DIR/mixture.json (the mixture `evaluate --save_mixture` or training kept),
    or None when the model has none: what the reading tools mix with unless told otherwise."""
    saved = run_dir.RunDir(model_dir).read_mixture()
    return saved["ngram_dir"] if saved else None


def line_scorer(model_dir: str | None, ngram_dir: str | None, mode: str, precision=None, mixture: bool = True):
    """The `LineScorer` of `model_flags.scoring_models`'s answer: a network alone is mixed with the n-gram its
    directory's mixture.json keeps, unless `mixture` is False (query's and rescore's --nomixture)."""
    if mode == "network" and mixture:
        ngram_dir = saved_mixture_ngram(model_dir)
        mode = "mixture" if ngram_dir else "network"
    return LineScorer(model_dir, ngram_dir, mode, precision)


class LineScorer:
    """Scores lines with a trained model directory, optionally mixed with (or replaced by) an n-gram.

    Args:
      model_dir: a directory written by `nplm_tf.train`; None with mode "ngram": the n-gram alone, on its own
        vocabulary.
      ngram_dir: an `nplm_tf.ngram` directory on the same vocabulary, or None.
      mode: "network"; "mixture" (λ per context frequency: the model directory's saved fit when it is for
        this n-gram as it is now, else fitted on the model's own valid split, in memory: nothing is written);
        or "ngram" (the n-gram alone, as KenLM's `query` scores it).
      precision: None (the default): the network in NumPy, float32, without TensorFlow; else TensorFlow in this
        precision (`loading.load_trained`).
      network: with precision None, the model directory's `NumpyNetwork` when the caller has it loaded.
    """

    def __init__(
        self, model_dir: str, ngram_dir: str | None = None, mode: str = "network", precision=None, network=None
    ):
        self.model_dir, self.ngram_dir, self.mode, self.precision = model_dir, ngram_dir, mode, precision
        self._model = self._numpy = None
        if model_dir is None:  # an n-gram alone
            self.config, self.vocab = None, run_dir.RunDir(ngram_dir).load_vocab()
        elif precision is None:
            run = run_dir.check_trained(model_dir)
            self.config, self.vocab = run.read_config(), run.load_vocab()
            self._numpy = network or (NumpyNetwork.load(model_dir) if mode != "ngram" else None)
        else:
            self.config, self.vocab, self._model = loading.load_trained(model_dir, precision)
        self.ngram, self.weights, self.fit = None, None, None  # fit: a fit made here (`save_fit` keeps it)
        if mode != "network":
            self.ngram = network_mixture.load_checked(self.vocab, ngram_dir)
        if mode == "mixture":
            self.weights = self._fitted_weights()

    @property
    def model(self):
        """The Keras model (loaded with TensorFlow on first use where the scorer computes in NumPy)."""
        if self._model is None:
            _, _, self._model = loading.load_trained(self.model_dir, self.precision)
        return self._model

    def _fitted_weights(self) -> np.ndarray:
        """λ per context frequency: the model directory's saved fit when it is for this n-gram as it is now, else
        the user's cache's (`fit_cache`), else fitted on the model's valid split (in memory, then cached)."""
        saved = run_dir.RunDir(self.model_dir).read_mixture()
        same = saved and os.path.abspath(saved["ngram_dir"]) == os.path.abspath(self.ngram_dir)
        digest = ngram_lib.digest(self.ngram)  # once, for the saved fit's check, the cache's key and a fit
        if same and network_mixture.fitted_with(saved, self.ngram, digest):  # else fitted again: the n-gram was rebuilt
            return np.asarray(saved["context_frequency"])
        cached = fit_cache.path_for(self.model_dir, digest)
        weights = fit_cache.read(cached)
        if weights is not None:
            if same:  # said each time: the model's own fit is stale, and evaluate --save_mixture mends it
                print(
                    f"note: {self.model_dir}'s mixture.json is stale (its saved fit is for the n-gram before it was "
                    f"rebuilt); the fit kept in {cached} for {self.ngram_dir} as it is now is served "
                    "(`nplm_tf.evaluate --save_mixture` fits it again into the model directory).",
                    file=sys.stderr,
                    flush=True,
                )
            return weights
        start = time.perf_counter()
        valid = corpus_flags.corpus_from_flags(run_dir.RunDir(self.model_dir).read_corpus(), self.model_dir)["valid"]
        p_valid = self.network_probabilities(valid)  # fitted and reported on the same split: scored once
        probs = {"valid": p_valid, "eval": p_valid}
        splits = {"valid": valid, "eval": valid}
        report = network_mixture.fit_and_score(
            probs, splits, self.vocab, self.ngram, self.ngram_dir, "eval", digest=digest
        )
        self.fit = report["fit"]
        weights = np.asarray(report["context_frequency"]["weights"])
        why = "its saved fit is for the n-gram before it was rebuilt" if same else "the model keeps no fit for it"
        kept = (
            f"kept for the next call in {cached}"
            if fit_cache.write(cached, weights, self.model_dir, self.ngram_dir)
            else f"the cache {fit_cache.cache_dir()} cannot be written, so the next call fits again"
        )
        print(
            f"note: fitted the mixture with {self.ngram_dir} on the valid split ({why}) in "
            f"{time.perf_counter() - start:.1f} s; nothing was saved in the model directory, the fit is {kept} "
            f"(`nplm_tf.evaluate --model_dir={self.model_dir} --ngram_dir={self.ngram_dir} --save_mixture` keeps "
            "it with the model).",
            file=sys.stderr,
            flush=True,
        )
        return weights

    def network_probabilities(self, split: corpus_lib.Split) -> np.ndarray:
        if self._numpy is not None:
            lines = [self.vocab.ids(corpus_lib.tokenize(line)) for line in split.iter_lines()]
            return np.exp(self._numpy.line_log_probs([ids for ids in lines if ids]))
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.network import scoring

        return scoring.token_probabilities(self.model, eval_dataset(split, self.vocab, self.config, self.model.head))

    def probabilities(self, split: corpus_lib.Split) -> np.ndarray:
        """P of every predicted token of `split`, in order, by this scorer's mode."""
        return self._by_mode(
            lambda: self.network_probabilities(split), lambda: ngram_lib.token_arrays(split, self.vocab)
        )

    def empty_line_probability(self) -> float:
        """P(`</s>` | the start of a line) by this scorer's mode: what a blank line predicts (the windows and
        n-gram arrays of a split skip blank lines, so it is scored here on its own)."""

        def network():
            if self._numpy is not None:
                return np.exp(self._numpy.line_log_probs([[]]))
            # deferred: TensorFlow and tensorflow-text loads when this runs, not with the module
            import tensorflow as tf

            from nplm_tf.network import scoring
            from pipelines import windows

            window = [[self.vocab.bos_id] * (self.config.order - 1) + [self.vocab.eos_id]]
            dataset = tf.data.Dataset.from_tensors(windows.split_window(tf.constant(window, tf.int64)))
            return scoring.token_probabilities(self.model, dataset)

        return float(
            self._by_mode(network, lambda: TokenArrays.from_lines([[]], self.vocab.bos_id, self.vocab.eos_id))[0]
        )

    def _by_mode(self, network, ngram_arrays) -> np.ndarray:
        """The network's probabilities (`network()`), the n-gram's of the same tokens (`ngram_arrays()`), or
        their mixture, by this scorer's mode; each is computed only when the mode needs it."""
        if self.mode == "network":
            return network()
        arrays = ngram_arrays()
        p_ng = self.ngram.token_probabilities(arrays)
        if self.mode == "ngram":
            return p_ng
        weights = mixture_lib.context_weights(mixture_lib.pair_table(self.weights), self.ngram.context_counts(arrays))
        return mixture_lib.mix([network(), p_ng], weights)

    def score(self, lines: list[str]) -> list[LineScore]:
        """One `LineScore` per line (a blank line: `</s>` alone)."""
        tokens = [corpus_lib.tokenize(line) for line in lines]
        eos, lengths, empty = self.vocab.eos_id, None, None
        if self.mode == "ngram":  # every line, blank ones too, in one pass; KenLM's n-gram lengths beside P
            arrays = TokenArrays.from_lines([self.vocab.ids(t) for t in tokens], self.vocab.bos_id, eos)
            probs, lengths = self.ngram.token_probabilities(arrays), matched_lengths(self.ngram, arrays)
        else:
            kept = tuple(" ".join(t) for t in tokens if t)
            probs = self.probabilities(corpus_lib.Split("lines", lines=kept)) if kept else np.zeros(0)
            empty = self.empty_line_probability() if len(kept) < len(tokens) else None
        scores, start = [], 0
        for words in tokens:
            if not words and lengths is None:
                scores.append(LineScore(["</s>"], np.array([eos]), np.log10([empty])))
                continue
            words = [*words, "</s>"]
            end = start + len(words)
            ids = np.array(self.vocab.ids(words[:-1]) + [eos])
            length = lengths[start:end] if lengths is not None else None
            scores.append(LineScore(words, ids, np.log10(probs[start:end]), length))
            start = end
        return scores


def matched_lengths(ngram, data: TokenArrays) -> np.ndarray:
    """The length of the longest n-gram the model lists ending at each predicted token (its context's last
    words, then it), KenLM's `ngram_length`; 1 where only the unigram matches."""
    ids, length = data.tokens, np.ones(data.tokens.size, np.int64)
    for k in range(2, ngram.order + 1):
        ids = ngram.extend_ids(ids, data, k)
        length[ids >= 0] = k
    return length[data.predicted]


def kenlm_line(score, order: int) -> str:
    """A `LineScore` as KenLM's `query` prints a line: word=id n log10P per token, then the total and OOVs (n:
    the matched length, else min(position + 1, order))."""
    lengths = score.lengths if score.lengths is not None else [min(p + 1, order) for p in range(len(score.ids))]
    fields = [
        f"{word}={int(i)} {int(n)} {value:.6g}"
        for word, i, n, value in zip(score.words, score.ids, lengths, score.log10)
    ]
    oov = int((score.ids[:-1] == 1).sum()) if len(score.ids) else 0
    return "\t".join([*fields, f"Total: {score.total:.8g} OOV: {oov}"])
