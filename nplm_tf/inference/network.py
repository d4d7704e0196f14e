"""Equation (1) and every output head in NumPy, from a model directory's saved weights, without TensorFlow.

Scoring a few sentences needs one small forward pass; importing TensorFlow and building its graph costs
seconds and most of a gigabyte. `NumpyNetwork` reads `best.weights.h5` with h5py (Keras's own weights
file, every variable float32) and computes

    x = (C(w_{t-1}), ..., C(w_{t-n+1})),   y = b + W·x + U·tanh(d + H·x)

in float32 (as the TensorFlow path computes at `--precision=float32`), then every probability in float64 by
the run's output head (`network.heads`, in the NumPy engine): the full softmax, the word classes', a short list
with its n-gram tail (the tail n-gram's own arrays, `kneser_ney.KneserNey`) or its network tail. The results
equal the TensorFlow path's in float32 (`tests/inference_test.py`). A run trained in mixed_bfloat16 is computed
here in float32: the same weights, computed exactly; the TensorFlow path in bfloat16 rounds them.

Contexts are (rows, n-1) ids oldest first, `<s>`-padded (id |V|), as the serving graph takes them; lines
are lists of word ids, each predicting its words and then `</s>`.
"""

from __future__ import annotations

import concurrent.futures
import os

import numpy as np

from nplm_tf import engines
from nplm_tf.core import run_dir as run_dir_lib
from nplm_tf.core.config import Config, ConfigError
from nplm_tf.network import forward, heads, loading

CHUNK = 1024  # contexts per matmul at most: bounds the (rows, |V|) float32 logits held at once


def read_weights(path: str, config: Config, vocab_size: int, rows: bool) -> dict[str, np.ndarray]:
    """The layer's variables from a Keras `.weights.h5` file: C, H, d, U, b, W (None where absent), U and W
    as (inputs, outputs) whatever the storage (`rows`: stored a row per output, the head's `stores_rows`)."""
    # deferred: h5py loads when this runs, not with the module
    import h5py

    try:
        with h5py.File(path, "r") as f:
            layers = f["layers"]
            name = next(n for n in layers if n.startswith("nplm"))
            group = layers[name]["vars"]
            values = [np.asarray(group[str(i)]) for i in range(len(group))]
    except (OSError, KeyError, StopIteration) as e:
        raise ConfigError(
            f"{path} cannot be read ({type(e).__name__}); it was changed after it was written: restore it, or "
            "train again in a new directory."
        ) from None
    names = ["C"] + (["H", "d", "U"] if config.hidden_dim else []) + ["b"] + (["W"] if config.direct else [])
    weights = dict(zip(names, values))  # a dropout run's step counter comes last: not a weight
    if len(values) < len(names) or weights["C"].shape != (vocab_size + 1, config.feature_dim):
        raise ConfigError(f"{path} does not hold this run's weights (config.json); restore the run's files.")
    for key in ("U", "W"):
        if key in weights and rows:
            weights[key] = np.ascontiguousarray(weights[key].T)
    return {key: weights.get(key) for key in ("C", "H", "d", "U", "b", "W")}


class NumpyNetwork:
    """A trained run's network (and a short list's tail), for scoring and next-word distributions.

    Args:
      config: the run's configuration.
      head: its output head (`loading.load_head`), with a short list's tail n-gram where it has one.
      weights: `read_weights`' arrays.
    """

    def __init__(self, config: Config, head: heads.Head, weights: dict):
        self.config, self.vocab_size = config, head.vocab_size
        self.order, self.context_size = config.order, config.context_size
        self.bos_id = head.vocab_size  # the input-only padding row of C
        self.C, self.H, self.d, self.U, self.b, self.W = (weights[k] for k in ("C", "H", "d", "U", "b", "W"))
        # b as one more row of the first output weights (U, or W without a hidden layer), against a column of
        # ones in `logits`: y comes out of one matmul with its bias, no pass over the block to add it. U (or W)
        # and b stay views of the stacked array.
        first = "U" if self.U is not None else "W"
        self._biased = np.concatenate([getattr(self, first), self.b[None, :]]).astype(np.float32, copy=False)
        setattr(self, first, self._biased[:-1])
        self.b = self._biased[-1]
        self.head = head
        if head.needs_ngram and head.ngram is None:
            raise ConfigError("a short list with an n-gram tail needs its tail n-gram.")
        self._tables = None  # `premultiplied`'s, built when asked for
        self._output_rows = None  # `raw_output`'s [U; b] a row per word

    @classmethod
    def load(cls, model_dir: str) -> NumpyNetwork:
        """The network of the training run in `model_dir` (its best-by-validation weights)."""
        run = run_dir_lib.check_trained(model_dir)
        config = run.read_config()
        head = loading.load_head(run, config, _vocab_size(run.vocab_path))
        return cls(config, head, read_weights(run.best_weights, config, head.vocab_size, head.stores_rows))

    # ---------------------------------------------------------- equation (1) --

    def hidden(self, context: np.ndarray) -> list[np.ndarray]:
        """(rows, n-1) oldest first -> the output layer's inputs: [tanh(d + H·x)] and x when W exists, float32."""
        context = np.asarray(context, np.int64)[:, -self.context_size :]
        x = forward.word_features(self.C, context, engines.NUMPY)  # newest word's features first
        return forward.output_layer_inputs(x, self.H, self.d, self.W is not None, engine=engines.NUMPY)

    def premultiplied(self) -> list[np.ndarray]:
        """Q_k = C·H_k for each context position k (newest word first), (|V| + 1, h) float32 each: the first
        layer's product computed once for every word (nplm's `premultiply`; Devlin et al. 2014), so that
        H·x = Σ_k Q_k[w_k] and a new context's hidden layer costs (n − 1)·h additions and h tanh. They take
        (n − 1)·(|V| + 1)·(h + 1)·4 bytes (`premultiplied_bytes`), built on first use and kept."""
        if self._tables is None:
            if self.H is None:
                raise ConfigError("this network has no hidden layer to precompute (hidden_dim=0).")
            m, h = self.config.feature_dim, self.H.shape[1]
            tables = []
            for k in range(self.context_size):  # one more column, 0: the raw hidden layer's bias unit (`_d_raw`)
                table = np.zeros((self.C.shape[0], h + 1), np.float32)
                table[:, :h] = self.C @ self.H[k * m : (k + 1) * m]
                tables.append(table)
            # d with a last entry whose tanh is 1.0 in float32 (tanh(20) = 1 − 8.5e-18): the bias unit of
            # `raw_output`'s [U; b] rows, without a copy per context
            self._d_raw = np.append(self.d, np.float32(20.0)).astype(np.float32)
            self._tables = tables
        return self._tables

    def premultiplied_bytes(self) -> int:
        return self.context_size * self.C.shape[0] * ((self.H.shape[1] + 1) if self.H is not None else 0) * 4

    def raw_hidden(self, context) -> np.ndarray:
        """[tanh(d + Σ_k Q_k[w_k]), 1] of one context (its n − 1 ids oldest first, `<s>`-padded; −1, "nothing",
        reads the last row, `<s>`'s), float32 (h + 1,): the hidden layer from the precomputed tables, with a 1
        for the bias (`raw_output`)."""
        tables, c = self._tables or self.premultiplied(), self.context_size
        total = tables[0][context[c - 1]] + self._d_raw
        for k in range(1, c):
            total += tables[k][context[c - 1 - k]]
        return np.tanh(total, out=total)

    def raw_output(self, hidden: np.ndarray, word: int) -> float:
        """y_word = b + U·tanh(d + H·x) of a `raw_hidden` (no direct connections): the network's raw score,
        a log-probability only where the network is self-normalized (ln Z near 0)."""
        rows = self._output_rows if self._output_rows is not None else self._raw_rows()
        return float(np.dot(rows[word], hidden))

    def raw_outputs(self, hidden: np.ndarray) -> np.ndarray:
        """`raw_output` of every word, (|V|,) float32: one matrix-vector product."""
        return self._raw_rows() @ hidden

    def _raw_rows(self) -> np.ndarray:
        """[U; b] a row per word, (|V|, h + 1), b last, built on first use and kept."""
        if self._output_rows is None:
            if self.W is not None:
                raise ConfigError("raw scoring covers networks without direct connections (trained --nodirect).")
            self._output_rows = np.ascontiguousarray(self._biased.T)
        return self._output_rows

    def logits(self, parts: list[np.ndarray], start: int = 0, stop: int | None = None) -> np.ndarray:
        """y = b + W·x + U·tanh(d + H·x) for outputs start..stop-1, (rows, stop - start) float32."""
        weights = [w for w in (self.U, self.W) if w is not None]
        first = np.empty((len(parts[0]), parts[0].shape[1] + 1), np.float32)
        first[:, :-1], first[:, -1] = parts[0], 1.0
        y = first @ self._biased[:, start:stop]
        for part, w in zip(parts[1:], weights[1:], strict=True):  # in place: no block of fresh memory per term
            y += part @ w[:, start:stop]
        return y

    def outputs(self, parts: list[np.ndarray]) -> heads.Outputs:
        return heads.Outputs.numpy(parts, self.logits)

    # ----------------------------------------------------------------- heads --

    def log_probs(self, context: np.ndarray, target: np.ndarray) -> np.ndarray:
        """ln P(target | context), (T,) float64, over the whole vocabulary whatever the head (`Head.log_prob`)."""
        context, target = np.asarray(context, np.int64), np.asarray(target, np.int64)
        out = np.empty(len(target), np.float64)

        def chunk(lo: int) -> None:
            rows = slice(lo, lo + CHUNK)
            outputs = self.outputs(self.hidden(context[rows]))
            out[rows] = self.head.log_prob(outputs, context[rows], target[rows], engines.NUMPY)

        starts = range(0, len(target), CHUNK)
        if len(starts) > 1:  # NumPy's exp runs on one core and releases the GIL: a chunk per core at once
            with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                list(pool.map(chunk, starts))
        else:
            for lo in starts:
                chunk(lo)
        return out

    def distribution(self, context: np.ndarray) -> np.ndarray:
        """P(· | context) over all |V| words, (rows, |V|) float64; context (rows, n-1) oldest first."""
        context = np.asarray(context, np.int64)
        return self.head.distribution(self.outputs(self.hidden(context)), context, engines.NUMPY)

    def top_k(self, context: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k most probable next words of each context, most probable first (ties: the lower id): P (rows, k)
        float64 and ids (rows, k) int64, by the head's own ranking (`Head.top_k`: a short list's without the
        whole distribution)."""
        context = np.asarray(context, np.int64)
        return self.head.top_k(self.outputs(self.hidden(context)), context, k, engines.NUMPY)

    def sample(self, context: np.ndarray, seed, banned: int | None = None) -> np.ndarray:
        """One next word drawn for each context, (rows,) int64, by the head (`Head.sample`): `seed` a pair of
        integers (the same seed, the same words), `banned` a word never drawn (the others keep their
        proportions)."""
        context = np.asarray(context, np.int64)
        seed = np.asarray(seed, np.int64)
        return self.head.sample(self.outputs(self.hidden(context)), context, seed, banned, True, engines.NUMPY)

    def unnormalized(self, context: np.ndarray):
        """(y, ln Z) when the head's ln P(w | C) = y_w − ln Z (`Head.np_unnormalized`), else None."""
        return self.head.np_unnormalized(self.outputs(self.hidden(np.asarray(context, np.int64))))

    # ----------------------------------------------------------------- lines --

    def windows(self, lines: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Every predicted token of the lines (each word, then `</s>`): contexts (T, n-1) oldest first,
        `<s>`-padded, and targets (T,) (`forward.windows`, which the SavedModel's scoring uses too)."""
        flat = np.fromiter((w for ids in lines for w in ids), np.int64)
        lengths = np.array([len(ids) for ids in lines], np.int64)
        window = forward.windows(flat, lengths, self.context_size, self.bos_id, 0, engines.NUMPY)  # </s> is id 0
        return window[:, : self.context_size], window[:, self.context_size]

    def line_log_probs(self, lines: list[list[int]]) -> np.ndarray:
        """ln P of every predicted token of the lines, in order (each line's words, then `</s>`)."""
        return self.log_probs(*self.windows(lines))


def _vocab_size(path: str) -> int:
    """|V| of a `vocab.tsv` (one word a line), without reading the words."""
    with open(path, "rb") as f:
        return sum(1 for _ in f)
