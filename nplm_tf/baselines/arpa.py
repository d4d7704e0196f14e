"""The ARPA back-off format (KenLM, SRILM) of an interpolated Kneser-Ney model."""

from __future__ import annotations

import numpy as np

from nplm_tf.baselines import kneser_ney as kn
from pipelines import files
from pipelines import vocabulary as vocab_lib

ROWS_PER_CHUNK = 1 << 18


def write_arpa(
    model: kn.KneserNey, vocab: vocab_lib.Vocabulary, path: str, rows_per_chunk: int = ROWS_PER_CHUNK
) -> str:
    """The model in ARPA format: log10 p(w | h), the n-gram, log10 γ of it as a context.

    Each order is spelled and formatted `rows_per_chunk` n-grams at a time, so the
    text held at once is one chunk's, not an order's (millions of Python strings on
    a large corpus); the file is the same for every chunk size."""
    if rows_per_chunk < 1:
        raise ValueError(f"rows_per_chunk={rows_per_chunk} must be positive.")
    words = np.array(list(vocab.words) + [vocab_lib.BOS], dtype=object)
    with files.atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write("\n\\data\\\n")
        for k in range(1, model.order + 1):
            f.write(f"ngram {k}={model.orders[k].keys.size}\n")
        for k in range(1, model.order + 1):
            f.write(f"\n\\{k}-grams:\n")
            for start in range(0, model.orders[k].keys.size, rows_per_chunk):
                f.writelines(_rows(model, words, k, slice(start, start + rows_per_chunk)))
        f.write("\n\\end\\\n")
    return path


def _rows(model: kn.KneserNey, words: np.ndarray, k: int, rows: slice):
    """The ARPA lines of order k's n-grams `rows`.

    Formatted from Python lists, not numpy scalars (a numpy float formats 1.3x slower, and numpy's
    element-wise string concatenation cost as much again): twice as fast, the same text."""
    o = model.orders[k]
    columns = [o.word[rows]]
    g = o.context[rows]
    for j in range(k - 1, 0, -1):  # follow context links to spell the n-gram
        columns.insert(0, model.orders[j].word[g])
        g = model.orders[j].context[g]
    spelled = zip(*(words[column].tolist() for column in columns))
    prob = o.prob[rows]
    with np.errstate(divide="ignore"):
        logp = np.where(prob > 0, np.log10(np.maximum(prob, 1e-300)), -99.0).tolist()
        backoff = np.log10(o.backoff[rows]).tolist()
    if k < model.order:
        return (f"{p:.7g}\t{' '.join(t)}\t{b:.7g}\n" for p, t, b in zip(logp, spelled, backoff))
    return (f"{p:.7g}\t{' '.join(t)}\n" for p, t in zip(logp, spelled))
