"""Count-based baselines on the same pipeline and vocabulary as the network.

`train_ngram(order, output_dir, corpus)` builds the vocabulary exactly as
`nplm_tf.training` does, fits interpolated modified Kneser-Ney (or the paper's
deleted-interpolation trigram), scores valid and test with exact per-token
probabilities, and writes `metrics.json`, `vocab.tsv`, the model arrays
(`ngram.npz`) and, for Kneser-Ney, an ARPA file KenLM and SRILM can load.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import zipfile

import numpy as np

from nplm_tf.baselines import arpa as arpa_lib
from nplm_tf.baselines import interpolated
from nplm_tf.baselines import kneser_ney as kn
from nplm_tf.core.run_dir import NGRAM_MODEL, RunDir
from pipelines import corpus as corpus_lib
from pipelines import files
from pipelines import per_token as per_token_lib
from pipelines import vocabulary as vocab_lib

MODELS = {cls.__name__: cls for cls in (kn.KneserNey, interpolated.InterpolatedTrigram)}


def id_lines(split: corpus_lib.Split, vocab: vocab_lib.Vocabulary) -> list[list[int]]:
    """The split's lines as ids, in the same order as the window pipeline (blank lines skipped)."""
    lines = []
    for line in split.iter_lines():
        tokens = corpus_lib.tokenize(line)
        if tokens:
            lines.append(vocab.ids(tokens))
    return lines


def token_arrays(split: corpus_lib.Split, vocab: vocab_lib.Vocabulary) -> kn.TokenArrays:
    """`id_lines` as flat `TokenArrays`."""
    return kn.TokenArrays.from_lines(id_lines(split, vocab), vocab.bos_id, vocab.eos_id)


def write_per_token(path: str, vocab: vocab_lib.Vocabulary, data: kn.TokenArrays, probs: np.ndarray) -> None:
    """`probs` of `data`'s predicted tokens as a per-token file (`pipelines.per_token`), as `evaluate --per_token`
    writes one."""
    per_token_lib.write(path, (vocab.words[i] for i in data.tokens[data.predicted]), np.log(probs))


def perplexity(probs: np.ndarray) -> float:
    return math.exp(-float(np.log(probs).mean()))


def save(model, directory: str) -> str:
    """Writes `model` (either kind) to DIRECTORY/ngram.npz, atomically; `load` reads it back."""
    path = RunDir(directory).ngram_model
    files.replace_atomically(path, lambda tmp: np.savez(tmp, **model.get_state()))
    return path


def load(directory: str):
    """The `KneserNey` or `InterpolatedTrigram` that `save` wrote to `directory`."""
    path = RunDir(directory).ngram_model
    if not os.path.isfile(path):
        raise kn.NgramError(f"{directory} holds no n-gram model ({NGRAM_MODEL}); build one with nplm_tf.ngram.")
    try:
        with np.load(path) as f:
            state = dict(f)
        # Files written before the state named its kind: the weights mark the interpolated trigram.
        kind = str(state["kind"]) if "kind" in state else "InterpolatedTrigram" if "lambdas" in state else "KneserNey"
        return MODELS[kind].from_state(state)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        raise kn.NgramError(
            f"{path} cannot be read ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'no detail'}); it "
            "was changed after it was written: restore it, or build it again."
        ) from None


def digest(model) -> str:
    """A digest of everything `model` holds (`get_state`): equal for a rebuild with the same data and settings,
    another when anything differs. mixture.json records it, so that weights fitted with an n-gram are not
    served with one since rebuilt in its directory. (A check of content, not of security: SHA-1.)"""
    h = hashlib.sha1(usedforsecurity=False)
    for name, value in sorted(model.get_state().items()):
        value = np.ascontiguousarray(value)
        h.update(f"{name}:{value.dtype.str}:{value.shape};".encode())
        h.update(value.reshape(-1).view(np.uint8))
    return h.hexdigest()


SMOOTHINGS = ("kneser_ney", "interpolated")


def _progress(message: str) -> None:
    """One line on stderr per stage of a build (a large corpus takes minutes); stdout keeps the results."""
    print(message, file=sys.stderr, flush=True)


def check_options(order: int, smoothing: str, prune=()) -> None:
    """`train_ngram`'s order, smoothing and pruning thresholds, checked (no data or TensorFlow needed:
    `nplm_tf.ngram` checks its flags with it before TensorFlow loads)."""
    if order < 1:
        raise kn.NgramError(f"order={order} must be at least 1.")
    if smoothing not in SMOOTHINGS:
        raise kn.NgramError(f"smoothing={smoothing!r} must be one of {SMOOTHINGS}.")
    if smoothing == "interpolated" and order != 3:
        raise kn.NgramError(f"the interpolated model is a trigram; use --order=3 (got {order}).")
    if any(kn.prune_thresholds(prune, order)) and smoothing != "kneser_ney":
        raise kn.NgramError("only the Kneser-Ney model is pruned; leave --prune out with --smoothing=interpolated.")


def train_ngram(
    order: int,
    output_dir: str,
    corpus: corpus_lib.Corpus,
    min_count: int = 4,
    arpa: bool = True,
    smoothing: str = "kneser_ney",
    max_vocab: int = 0,
    per_token: str | None = None,
    prune=(),
) -> dict:
    """Fits the n-gram model on train (and, when interpolated, its λ on valid); writes metrics.json.

    `kneser_ney`: interpolated modified Kneser-Ney of `order`, with an ARPA
    export. `interpolated`: the paper's deleted-interpolation trigram (order 3).
    The vocabulary is the network's for the same `min_count` and `max_vocab`. `per_token`: a file to write
    the test split's ln P per token to, as `evaluate --per_token` does. `prune`: Kneser-Ney's count thresholds
    per order (`KneserNey.prune`).
    """
    check_options(order, smoothing, prune)
    for name in corpus_lib.SPLITS:
        corpus_lib.check_split(corpus[name], 1)
    run = RunDir(output_dir)
    vocab = vocab_lib.build(corpus["train"], min_count, max_vocab)
    arrays = {name: token_arrays(corpus[name], vocab) for name in corpus_lib.SPLITS}
    kind = "the interpolated trigram" if smoothing == "interpolated" else f"the Kneser-Ney {order}-gram"
    _progress(f"building {kind} on {int(arrays['train'].predicted.sum()):,} train tokens, |V| = {vocab.size:,}")
    if smoothing == "interpolated":
        model = interpolated.InterpolatedTrigram(arrays["train"], arrays["valid"], vocab.size)
        warnings = []
    else:
        model = kn.KneserNey(arrays["train"], order, vocab.size)
        warnings = model.warnings
        if any(kn.prune_thresholds(prune, order)):
            kept = lambda: sum(model.orders[k].keys.size for k in range(2, order + 1))  # noqa: E731
            before = kept()
            model.prune(prune)
            _progress(f"pruned to {kept():,} of {before:,} n-grams of orders 2-{order}")
    metrics = {
        "model": "modified_kneser_ney" if smoothing == "kneser_ney" else "interpolated_trigram",
        "min_count": min_count,
        "max_vocab": max_vocab,
    }
    if smoothing == "kneser_ney":
        metrics["discounts"] = {str(k): list(model.orders[k].discounts) for k in range(1, order + 1)}
        metrics["prune"] = list(model.prune_thresholds)
        metrics["ngrams"] = ngram_counts(model)
    else:
        metrics["lambdas"] = model.lambdas.tolist()
    arpa = smoothing == "kneser_ney" and arpa
    return _write_directory(run, model, vocab, arrays, corpus, warnings, metrics, arpa, per_token)


def ngram_counts(model) -> dict[str, int]:
    """The n-grams a Kneser-Ney model holds, per order."""
    return {str(k): int(model.orders[k].keys.size) for k in range(1, model.order + 1)}


def _write_directory(run, model, vocab, arrays, corpus, warnings, metrics: dict, arpa: bool, per_token) -> dict:
    """What `train_ngram` and `import_arpa` write once the model is in hand, in this order (a refused build
    writes nothing): vocab.tsv (which makes the directory), model.arpa when `arpa`, the warnings, ngram.npz,
    then every split scored, the test split's `per_token` file and metrics.json: the caller's `metrics` with
    the splits' figures."""
    run.save_vocab(vocab)
    if arpa:
        _progress(f"writing {run.arpa}")
        arpa_lib.write_arpa(model, vocab, run.arpa)
    for warning in warnings:
        print(f"warning: {warning}", flush=True)
    save(model, run.path)
    _progress("scoring train, valid and test")
    probs = {name: model.token_probabilities(arrays[name]) for name in corpus_lib.SPLITS}
    metrics = {
        **metrics,
        "order": model.order,
        "corpus": corpus.name,
        "vocab_size": vocab.size,
        "tokens": {name: int(p.size) for name, p in probs.items()},
        "warnings": warnings,
        **{f"{name}_perplexity": perplexity(p) for name, p in probs.items()},
    }
    if per_token:
        write_per_token(per_token, vocab, arrays["test"], probs["test"])
    run.write_metrics(metrics)
    return metrics


def import_arpa(
    path: str,
    output_dir: str,
    corpus: corpus_lib.Corpus,
    min_count: int = 4,
    max_vocab: int = 0,
    unk_token: str = vocab_lib.UNK,
    arpa: bool = True,
    per_token: str | None = None,
) -> dict:
    """Reads the ARPA back-off model at `path` (`arpa.read_arpa`'s rules) over the vocabulary `train_ngram`
    builds for `min_count` and `max_vocab`, counts its n-grams' contexts on train (the mixture's λ buckets), scores
    valid and test, and writes the same directory `train_ngram` does: every command taking `--ngram_dir` reads
    it unchanged. Nothing is written when the file is refused."""
    for name in corpus_lib.SPLITS:
        corpus_lib.check_split(corpus[name], 1)
    run = RunDir(output_dir)
    vocab = vocab_lib.build(corpus["train"], min_count, max_vocab)
    _progress(f"reading {path} over |V| = {vocab.size:,}")
    model, warnings = arpa_lib.read_arpa(path, vocab, unk_token)
    arrays = {name: token_arrays(corpus[name], vocab) for name in corpus_lib.SPLITS}
    arpa_lib.attach_counts(model, arrays["train"])
    metrics = {
        "model": "arpa",
        "arpa": os.path.abspath(path),
        "min_count": min_count,
        "max_vocab": max_vocab,
        "ngrams": ngram_counts(model),
    }
    return _write_directory(run, model, vocab, arrays, corpus, warnings, metrics, arpa, per_token)
