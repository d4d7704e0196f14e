"""Count-based baselines on the same pipeline and vocabulary as the network.

`train_ngram(order, output_dir, corpus)` builds the vocabulary exactly as
`train_lib` does, fits interpolated modified Kneser-Ney (or the paper's
deleted-interpolation trigram), scores valid and test with exact per-token
probabilities, and writes `metrics.json`, `vocab.tsv`, the model arrays
(`ngram.npz`) and, for Kneser-Ney, an ARPA file KenLM and SRILM can load.
"""

from __future__ import annotations

import math
import os

import numpy as np

from nplm_tf import callbacks as callbacks_lib
from nplm_tf import interpolated
from nplm_tf import kneser_ney as kn
from pipelines import corpus as corpus_lib
from pipelines import files
from pipelines import vocabulary as vocab_lib

MODEL_FILE = "ngram.npz"
ARPA_FILE = "model.arpa"
METRICS_FILE = "metrics.json"
_FIELDS = ("keys", "context", "word", "suffix", "count", "raw", "prob", "backoff")


def token_arrays(split: corpus_lib.Split, vocab: vocab_lib.Vocabulary) -> kn.TokenArrays:
    """The split's lines as ids, in the same order as the window pipeline (blank lines skipped)."""
    lines = []
    for line in split.iter_lines():
        tokens = corpus_lib.tokenize(line)
        if tokens:
            lines.append(vocab.ids(tokens))
    return kn.TokenArrays.from_lines(lines, vocab.bos_id, vocab.eos_id)


def perplexity(probs: np.ndarray) -> float:
    return math.exp(-float(np.log(probs).mean()))


def save(model, directory: str) -> str:
    arrays = {}
    if isinstance(model, interpolated.InterpolatedTrigram):
        arrays["lambdas"] = model.lambdas
        model = model.tables
    arrays.update({"order": np.array(model.order), "vocab_size": np.array(model.vocab_size)})
    for k in range(1, model.order + 1):
        o = model.orders[k]
        arrays.update({f"{k}_{f}": getattr(o, f) for f in _FIELDS})
        arrays[f"{k}_discounts"] = np.array(o.discounts)
    path = os.path.join(directory, MODEL_FILE)
    files.replace_atomically(path, lambda tmp: np.savez(tmp, **arrays))
    return path


def load(directory: str) -> kn.KneserNey:
    path = os.path.join(directory, MODEL_FILE)
    if not os.path.isfile(path):
        raise kn.NgramError(f"{directory} holds no n-gram model ({MODEL_FILE}); build one with nplm_tf.ngram.")
    with np.load(path) as f:
        model = kn.KneserNey.__new__(kn.KneserNey)
        model.order, model.vocab_size = int(f["order"]), int(f["vocab_size"])
        model.bos_id, model.base, model.warnings = model.vocab_size, model.vocab_size + 1, []
        model.orders = [None] + [
            kn.Order(**{name: f[f"{k}_{name}"] for name in _FIELDS}, discounts=tuple(f[f"{k}_discounts"]))
            for k in range(1, model.order + 1)
        ]
        if "lambdas" in f:
            trigram = interpolated.InterpolatedTrigram.__new__(interpolated.InterpolatedTrigram)
            trigram.vocab_size, trigram.tables, trigram.lambdas = model.vocab_size, model, f["lambdas"]
            trigram._frequencies()
            return trigram
    return model


def write_arpa(model: kn.KneserNey, vocab: vocab_lib.Vocabulary, path: str) -> str:
    """The model in ARPA format: log10 p(w | h), the n-gram, log10 γ of it as a context."""
    words = np.array(list(vocab.words) + [vocab_lib.BOS], dtype=object)
    with files.atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write("\n\\data\\\n")
        for k in range(1, model.order + 1):
            f.write(f"ngram {k}={model.orders[k].keys.size}\n")
        for k in range(1, model.order + 1):
            o = model.orders[k]
            f.write(f"\n\\{k}-grams:\n")
            columns = [o.word]
            g = o.context
            for j in range(k - 1, 0, -1):  # follow context links to spell the n-gram
                columns.insert(0, model.orders[j].word[g])
                g = model.orders[j].context[g]
            text = words[columns[0]]
            for col in columns[1:]:
                text = text + " " + words[col]
            with np.errstate(divide="ignore"):
                logp = np.where(o.prob > 0, np.log10(np.maximum(o.prob, 1e-300)), -99.0)
                backoff = np.log10(o.backoff)
            if k < model.order:
                rows = (f"{p:.7g}\t{t}\t{b:.7g}\n" for p, t, b in zip(logp, text, backoff))
            else:
                rows = (f"{p:.7g}\t{t}\n" for p, t in zip(logp, text))
            f.writelines(rows)
        f.write("\n\\end\\\n")
    return path


SMOOTHINGS = ("kneser_ney", "interpolated")


def train_ngram(order: int, output_dir: str, corpus: corpus_lib.Corpus, min_count: int = 4,
                arpa: bool = True, smoothing: str = "kneser_ney") -> dict:
    """Fits the n-gram model on train (and, when interpolated, its λ on valid); writes metrics.json.

    `kneser_ney`: interpolated modified Kneser-Ney of `order`, with an ARPA
    export. `interpolated`: the paper's deleted-interpolation trigram (order 3).
    """
    if order < 1:
        raise kn.NgramError(f"order={order} must be at least 1.")
    if smoothing not in SMOOTHINGS:
        raise kn.NgramError(f"smoothing={smoothing!r} must be one of {SMOOTHINGS}.")
    if smoothing == "interpolated" and order != 3:
        raise kn.NgramError(f"the interpolated model is a trigram; use --order=3 (got {order}).")
    for name in corpus_lib.SPLITS:
        corpus_lib.check_split(corpus[name], 1)
    os.makedirs(output_dir, exist_ok=True)
    vocab = vocab_lib.build(corpus["train"], min_count)
    vocab.save(output_dir)
    arrays = {name: token_arrays(corpus[name], vocab) for name in corpus_lib.SPLITS}
    if smoothing == "interpolated":
        model = interpolated.InterpolatedTrigram(arrays["train"], arrays["valid"], vocab.size)
        warnings = []
    else:
        model = kn.KneserNey(arrays["train"], order, vocab.size)
        warnings = model.warnings
        if arpa:
            write_arpa(model, vocab, os.path.join(output_dir, ARPA_FILE))
    for warning in warnings:
        print(f"warning: {warning}", flush=True)
    save(model, output_dir)
    probs = {name: model.token_probabilities(arrays[name]) for name in corpus_lib.SPLITS}
    metrics = {
        "model": "modified_kneser_ney" if smoothing == "kneser_ney" else "interpolated_trigram",
        "order": order,
        "corpus": corpus.name,
        "vocab_size": vocab.size,
        "min_count": min_count,
        "tokens": {name: int(p.size) for name, p in probs.items()},
        "warnings": warnings,
        **{f"{name}_perplexity": perplexity(p) for name, p in probs.items()},
    }
    if smoothing == "kneser_ney":
        metrics["discounts"] = {str(k): list(model.orders[k].discounts) for k in range(1, order + 1)}
    else:
        metrics["lambdas"] = model.lambdas.tolist()
    callbacks_lib.write_json(os.path.join(output_dir, METRICS_FILE), metrics)
    return metrics
