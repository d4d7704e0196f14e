"""The ARPA back-off format (KenLM, SRILM) of an interpolated Kneser-Ney model."""

from __future__ import annotations

import numpy as np

from nplm_tf.baselines import arpa_close, arpa_tables
from nplm_tf.baselines import kneser_ney as kn
from pipelines import files
from pipelines import vocabulary as vocab_lib

ROWS_PER_CHUNK = 1 << 18
DIGITS = 12  # significant digits of each log10: the probabilities survive the text round trip (1e-9 in ln P)


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

    Formatted from Python lists, not numpy scalars (numpy floats format slower, and so does numpy's
    element-wise string concatenation): the same text, faster."""
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
        return (f"{p:.{DIGITS}g}\t{' '.join(t)}\t{b:.{DIGITS}g}\n" for p, t, b in zip(logp, spelled, backoff))
    return (f"{p:.{DIGITS}g}\t{' '.join(t)}\n" for p, t in zip(logp, spelled))


# ---------------------------------------------------------------- reading --


ArpaError = arpa_tables.ArpaError
MISSING_LOG10 = arpa_tables.MISSING_LOG10


def read_arpa(path: str, vocab: vocab_lib.Vocabulary, unk_token: str = vocab_lib.UNK) -> tuple[kn.KneserNey, list]:
    """A back-off model in ARPA format (KenLM's lmplz, SRILM, IRSTLM, `write_arpa`), as a `KneserNey` over
    `vocab` that every n-gram consumer reads unchanged: `prob` is P(w | h) of each listed n-gram, `backoff` β(h).

    The file is streamed: n-grams are kept as arrays, `arpa_tables.LINES_PER_CHUNK` lines of text at a time. The rules
    (docs/ngram_import.md):
      - `unk_token` is the file's spelling of the model's `<unk>`; `<s>` is a context only.
      - An n-gram whose context or suffix the file does not list gets that (n-1)-gram as a "blank", with the
        probability back-off gives it and β = 1: what the file means, in a closed trie.
      - Words of the file outside `vocab` that it only predicts (lmplz's own `<unk>` beside a text whose unknown
        words were spelled `unk_token`) are added to `<unk>`: P(<unk> | h) = Σ of their P(w | h), exactly, so
        every distribution stays normalized over `vocab`. One used in a context is refused.
      - A word of `vocab` the file lacks has log10 P = MISSING_LOG10 in every context, as KenLM gives one.
    Returns the model (counts zero until `attach_counts`) and the warnings to print.
    """
    return arpa_close.Reader(path, vocab, unk_token).read()


def attach_counts(model: kn.KneserNey, train: kn.TokenArrays) -> None:
    """Train counts an ARPA file does not hold, for what reads them (the mixture's λ buckets read the count of
    each context, `context_totals`): each order's n-grams counted in `train`, and the top order's contexts'
    totals, those of n-grams the file pruned included."""
    ids, below = train.tokens, None  # ids of the k-grams (and (k-1)-grams) ending at each position, -1: none
    for k in range(1, model.order + 1):
        if k > 1:
            below, ids = ids, model.extend_ids(ids, train, k)
        o = model.orders[k]
        valid = (ids >= 0) & train.predicted
        o.raw = np.bincount(ids[valid], minlength=o.keys.size).astype(np.float64)
        o.count = o.raw if k == model.order else np.zeros(o.keys.size)
    if model.order > 1:
        lower, top = model.orders[model.order - 1], model.orders[model.order]
        context = np.where(train.offset >= model.order - 1, np.roll(below, 1), -1)
        seen = (context >= 0) & train.predicted
        totals = np.bincount(context[seen], minlength=lower.keys.size).astype(np.float64)
        lower.pruned = totals - np.bincount(top.context, weights=top.count, minlength=lower.keys.size)
        top.pruned = np.zeros(top.keys.size)
