"""The network mixed with an n-gram model: weights fitted on valid, scored on any split."""

from __future__ import annotations

import os

import numpy as np

from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import mixture
from nplm_tf.baselines.kneser_ney import NgramError
from nplm_tf.core.run_dir import RunDir
from pipelines import corpus as corpus_lib
from pipelines import vocabulary as vocab_lib

NUM_BUCKETS = 8


def check_same_vocabulary(nn_vocab: vocab_lib.Vocabulary, ngram_dir: str) -> None:
    ngram_vocab = RunDir(ngram_dir).load_vocab()
    if ngram_vocab.words != nn_vocab.words:
        if ngram_vocab.size != nn_vocab.size:
            how = f"({ngram_vocab.size:,} types) than the network ({nn_vocab.size:,})"
        else:  # ids are ranks by train count: another corpus may keep the same number of words
            i = next(i for i, (a, b) in enumerate(zip(ngram_vocab.words, nn_vocab.words)) if a != b)
            how = f"than the network (both {nn_vocab.size:,} types, but id {i} is {ngram_vocab.words[i]!r} there "
            how += f"and {nn_vocab.words[i]!r} in the network)"
        raise NgramError(
            f"the n-gram model in {ngram_dir} has another vocabulary {how}; build it from the same corpus "
            "with the same --min_count and --max_vocab."
        )


def load_checked(vocab: vocab_lib.Vocabulary, ngram_dir: str):
    """The n-gram model in `ngram_dir`, checked to have the network's vocabulary `vocab`."""
    check_same_vocabulary(vocab, ngram_dir)
    return ngram_lib.load(ngram_dir)


def fitted_with(saved: dict, ngram, digest: str | None = None) -> bool:
    """Whether the weights of mixture.json (`saved`) were fitted with `ngram`, the model now in its directory (one
    fitted before mixture.json recorded the n-gram's digest: taken to be). `digest`: `ngram`'s, when the caller
    has it (default: computed here)."""
    return "ngram_digest" not in saved or saved["ngram_digest"] == (digest or ngram_lib.digest(ngram))


def save_fit(model_dir: str, report: dict) -> str:
    """Saves a `fit_and_score` report's fit as MODEL_DIR/mixture.json, which the model's tools and exports then
    serve; returns the file's path."""
    run = RunDir(model_dir)
    run.write_mixture(report["fit"])
    return run.file("mixture.json")


def fit_and_score(
    nn_probs: dict[str, np.ndarray],
    splits: dict[str, corpus_lib.Split],
    vocab: vocab_lib.Vocabulary,
    ngram,
    ngram_dir: str,
    eval_split: str,
    per_token: str | None = None,
    digest: str | None = None,
) -> dict:
    """Fits the three mixtures on `valid` and reports them on `eval_split`; `ngram`: the model in `ngram_dir`,
    on the network's vocabulary (`load_checked`); `per_token`: a file to write the eval split's ln P per token
    under the mixture with one weight per context frequency; `digest`: `ngram`'s, when the caller has it
    (default: computed here). Nothing is saved: the report's "fit" is what `save_fit` writes as mixture.json,
    where the user asked for it."""
    arrays = {name: ngram_lib.token_arrays(split, vocab) for name, split in splits.items()}
    ng = {name: ngram.token_probabilities(a) for name, a in arrays.items()}
    buckets = {name: mixture.frequency_buckets(ngram.context_counts(a), NUM_BUCKETS) for name, a in arrays.items()}
    for name in splits:
        if ng[name].size != nn_probs[name].size:
            raise NgramError(f"{name}: the network scored {nn_probs[name].size} tokens, the n-gram {ng[name].size}.")
    lam, _ = mixture.em_weight(nn_probs["valid"], ng["valid"])
    weights = mixture.bucket_weights(nn_probs["valid"], ng["valid"], buckets["valid"], NUM_BUCKETS)
    p_nn, p_ng = nn_probs[eval_split], ng[eval_split]
    p_mixed = mixture.mix([p_nn, p_ng], mixture.pair_table(weights)[buckets[eval_split]])  # the buckets fitted
    report = {
        "ngram_dir": ngram_dir,
        "ngram_order": ngram.order,
        "network_perplexity": ngram_lib.perplexity(p_nn),
        "ngram_perplexity": ngram_lib.perplexity(p_ng),
        "fixed_0.5": {
            "weight": 0.5,
            "perplexity": ngram_lib.perplexity(mixture.mix([p_nn, p_ng], np.array([0.5, 0.5]))),
        },
        "em": {
            "weight": lam,
            "perplexity": ngram_lib.perplexity(mixture.mix([p_nn, p_ng], mixture.pair_table(lam)[0])),
        },
        "context_frequency": {
            "buckets": "0: unseen context; b >= 1: train count in [2^(b-1), 2^b)",
            "weights": weights.tolist(),
            "perplexity": ngram_lib.perplexity(p_mixed),
        },
    }
    # Its absolute path: the export, query and training on may run in another directory.
    report["fit"] = {
        "ngram_dir": os.path.abspath(ngram_dir),
        "ngram_order": ngram.order,
        "ngram_digest": digest or ngram_lib.digest(ngram),  # weights of an n-gram since rebuilt in place are not served
        "em": lam,
        "context_frequency": weights.tolist(),
    }
    if per_token:
        ngram_lib.write_per_token(per_token, vocab, arrays[eval_split], p_mixed)
    return report
