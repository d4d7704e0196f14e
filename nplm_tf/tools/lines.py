"""Exact scores of many lines of text at once, by the network, its mixture with an n-gram, or the n-gram alone.

Lines go through the training pipeline (`tf.strings.split`, the vocabulary, `<s>` padding, windows that
never cross a line) in batches, so thousands of lines score in one pass; each line predicts its words
and `</s>`. A blank line is an empty sentence: it predicts `</s>` at the start of a line, as in KenLM's
`query` and the SavedModel's `score` (the corpus readers skip blank lines instead: they are no unit of text).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys

import numpy as np
import tensorflow as tf

from nplm_tf import run_dir
from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import mixture as mixture_lib
from nplm_tf.baselines import network_mixture
from nplm_tf.baselines.ngram_arrays import TokenArrays
from nplm_tf.network import scoring
from nplm_tf.training.data import eval_dataset
from pipelines import corpus as corpus_lib
from pipelines import corpus_flags, windows

LOG10 = math.log(10)
MODES = ("network", "mixture", "ngram")


@dataclasses.dataclass(frozen=True)
class LineScore:
    words: list[str]  # the line's tokens, then </s>
    ids: np.ndarray  # their vocabulary ids (<unk> = 1)
    log10: np.ndarray  # log10 P of each

    @property
    def total(self) -> float:
        return float(self.log10.sum())


class LineScorer:
    """Scores lines with a trained model directory, optionally mixed with (or replaced by) an n-gram.

    Args:
      model_dir: a directory written by `nplm_tf.train`.
      ngram_dir: an `nplm_tf.ngram` directory on the same vocabulary, or None.
      mode: "network"; "mixture" (λ per context frequency, fitted on the model's own valid split when the
        model directory holds no fit for this n-gram as it is now, then saved, as `evaluate --ngram_dir` does); or
        "ngram" (the n-gram alone, as KenLM's `query` scores it).
      precision: compute the network in this precision instead of the run's (`run_dir.load_trained`).
    """

    def __init__(self, model_dir: str, ngram_dir: str | None = None, mode: str = "network", precision=None):
        self.config, self.vocab, self.model = run_dir.load_trained(model_dir, precision)
        self.model_dir, self.ngram_dir, self.mode = model_dir, ngram_dir, mode
        self.ngram, self.weights = None, None
        if mode != "network":
            self.ngram = network_mixture.load_checked(self.vocab, ngram_dir)
        if mode == "mixture":
            self.weights = self._fitted_weights()

    def _fitted_weights(self) -> np.ndarray:
        saved = run_dir.RunDir(self.model_dir).read_mixture()
        same = saved and os.path.abspath(saved["ngram_dir"]) == os.path.abspath(self.ngram_dir)
        # Digested once, for the check and a fit after it (a fit from before mixture.json kept digests: none).
        digest = ngram_lib.digest(self.ngram) if same and "ngram_digest" in saved else None
        if same and network_mixture.fitted_with(saved, self.ngram, digest):  # else fitted again: the n-gram was rebuilt
            return np.asarray(saved["context_frequency"])
        valid = corpus_flags.corpus_from_flags(run_dir.RunDir(self.model_dir).read_corpus(), self.model_dir)["valid"]
        p_valid = self.network_probabilities(valid)  # fitted and reported on the same split: scored once
        probs = {"valid": p_valid, "eval": p_valid}
        splits = {"valid": valid, "eval": valid}
        report = network_mixture.fit_and_score(
            probs, splits, self.vocab, self.ngram, self.ngram_dir, self.model_dir, "eval", digest=digest
        )
        # Said: mixture.json decides what the next export serves.
        if same:
            why = "replacing the fit made before the n-gram was rebuilt"
        else:
            why = f"replacing the fit with {saved['ngram_dir']}" if saved else "the first fit there"
        print(
            f"note: fitted the mixture with {self.ngram_dir} on the valid split and saved it in "
            f"{run_dir.RunDir(self.model_dir).file(run_dir.MIXTURE)}, {why}; the next export serves it.",
            file=sys.stderr,
            flush=True,
        )
        return np.asarray(report["context_frequency"]["weights"])

    def network_probabilities(self, split: corpus_lib.Split) -> np.ndarray:
        return scoring.token_probabilities(self.model, eval_dataset(split, self.vocab, self.config))

    def probabilities(self, split: corpus_lib.Split) -> np.ndarray:
        """P of every predicted token of `split`, in order, by this scorer's mode."""
        return self._by_mode(
            lambda: self.network_probabilities(split), lambda: ngram_lib.token_arrays(split, self.vocab)
        )

    def empty_line_probability(self) -> float:
        """P(`</s>` | the start of a line) by this scorer's mode: what a blank line predicts (the windows and
        n-gram arrays of a split skip blank lines, so it is scored here on its own)."""

        def network():
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
        buckets = mixture_lib.frequency_buckets(self.ngram.context_counts(arrays), len(self.weights))
        return mixture_lib.mix(network(), p_ng, self.weights[buckets])

    def score(self, lines: list[str]) -> list[LineScore]:
        """One `LineScore` per line (a blank line: `</s>` alone)."""
        tokens = [corpus_lib.tokenize(line) for line in lines]
        kept = tuple(" ".join(t) for t in tokens if t)
        probs = self.probabilities(corpus_lib.Split("lines", lines=kept)) if kept else np.zeros(0)
        empty = self.empty_line_probability() if len(kept) < len(tokens) else None
        scores, start = [], 0
        for words in tokens:
            if not words:
                scores.append(LineScore(["</s>"], np.array([self.vocab.eos_id]), np.log10([empty])))
                continue
            words = [*words, "</s>"]
            end = start + len(words)
            ids = np.array(self.vocab.ids(words[:-1]) + [self.vocab.eos_id])
            scores.append(LineScore(words, ids, np.log10(probs[start:end])))
            start = end
        return scores
