"""What a short list would cost a trained full-softmax model: its perplexity with the tail handed to the n-gram.

    NLTK_DATA=../shared/nltk_data python -m benchmarks.shortlist_bound --model_dir=runs/mlp9 \
        [--shortlists=2000,4000,8000] [--tail_bins=1,8,64] [--ngram_dir=runs/kn4 | --tail_ngram_order=4]

A short list replaces part of the network's distribution with its tail n-gram (`nplm_tf.network.heads`).
This keeps a trained full-softmax network's own probabilities P_nn and replaces only that part, exactly as
each tail mode does, so it shows what N costs before a short list is trained (a short list that learned its
list as well as this network would score the same):

- `class` tail: P(i|C) = P_nn(i|C) for i in the list L; a tail word gets the network's total on the tail
  times its share of the tail under the n-gram, P_nn(T|C) · P_ng(i|C) / Σ_{j∈T} P_ng(j|C). With B tail bins
  (consecutive tail words in frequency order, equal unigram mass each, as in frequency-binned class outputs),
  the network's total on the word's bin times the word's share of that bin; B = 1 is the class tail.
- `backoff` tail: P(i|C) = P_nn(i|C) / P_nn(L|C) · Σ_{j∈L} P_ng(j|C) for i in L, and P_ng(i|C) in the tail.

The n-gram is modified Kneser-Ney on the run's train split and vocabulary (of --tail_ngram_order, or the
model in --ngram_dir). Prints one JSON line: per N, the share of the split's tokens in the tail, the nats
per token of the list's and of the tail's tokens (the full softmax, the n-gram alone, each mode), and the
perplexity of each mode with its ratio to the full softmax's.
"""

from __future__ import annotations

import json
import sys

from absl import flags

from nplm_tf.network import loading
from pipelines import app, corpus_flags  # the corpus flags: the run's corpus.json fills in those not given

MODEL_DIR = app.define_path("model_dir", None, "A trained full-softmax run (nplm_tf.train).", required=True)
SHORTLISTS = flags.DEFINE_list("shortlists", ["2000", "4000", "8000"], "List sizes N to measure.")
TAIL_BINS = flags.DEFINE_list("tail_bins", ["1"], "Numbers of tail bins B for the class tail (1: the class tail).")
NGRAM_DIR = app.define_path("ngram_dir", None, "Take the tail's Kneser-Ney model from here (same vocabulary).")
TAIL_ORDER = flags.DEFINE_integer(
    "tail_ngram_order", 0, "Order of the Kneser-Ney model built on train without --ngram_dir (0: train's default)."
)
SPLIT = flags.DEFINE_enum("split", "test", ["valid", "test"], "The split to score.")


def check() -> tuple[list[int], list[int], object]:
    """The list sizes and bin counts, checked against the run's vocabulary, and the run's corpus with the split
    to score checked, before TensorFlow loads."""
    from nplm_tf.core import run_dir
    from pipelines import corpus as corpus_lib
    from pipelines.errors import UserError

    if TAIL_ORDER.value < 0:
        raise UserError(f"--tail_ngram_order={TAIL_ORDER.value} must be 0 (train's default) or a positive order.")
    run = run_dir.check_trained(MODEL_DIR.value)
    if run.read_config().shortlist:
        raise UserError(f"{MODEL_DIR.value} is a short-list run; the bound needs a full-softmax model to start from.")
    vocab_size = run.load_vocab().size
    bins = app.positive_ints(TAIL_BINS, required=True)
    list_sizes = app.positive_ints(SHORTLISTS, vocab_size, required=True)
    if bins[-1] > vocab_size - list_sizes[-1]:
        raise UserError(
            f"--tail_bins has {bins[-1]:,}, more than the {vocab_size - list_sizes[-1]:,} tail words of N = "
            f"{list_sizes[-1]:,}."
        )
    corpus = corpus_flags.corpus_from_flags(run.read_corpus(), MODEL_DIR.value)
    corpus_lib.check_split(corpus[SPLIT.value], order=1)
    return list_sizes, bins, corpus


def tail_bins(unigram, list_size: int, count: int):
    """The bin (0..count-1) of each tail word (ids list_size..|V|-1, most frequent first): where the tail's
    unigram mass before the word falls in `count` equal parts, kept consecutive, no bin empty, so that a bin
    past a heavy word still gets one (`count` = the tail's size puts every word in its own bin)."""
    import numpy as np

    tail = np.asarray(unigram[list_size:], np.float64)
    by_mass = np.floor((np.cumsum(tail) - tail) / tail.sum() * count).astype(np.int64)
    bins = np.zeros(tail.size, np.int32)
    for i in range(1, tail.size):  # no more than one bin further per word, and enough words left for the rest
        bins[i] = min(max(by_mass[i], bins[i - 1], count - (tail.size - i)), bins[i - 1] + 1)
    return bins


def bound_log_probs(model, ngram, dataset, list_sizes: list[int], bins: list[int], progress=None) -> dict:
    """ln P(target | context) of every window of `dataset` (contexts oldest first), float64 arrays: `full`,
    the network's; `ngram`, the n-gram's; `class_N_B` and `backoff_N`, the short lists' formulas above with the
    network's probabilities in place of a short list's; and `target`."""
    import numpy as np
    import tensorflow as tf

    from nplm_tf.baselines import ngram_graph

    served = ngram_graph.ServingKneserNey(ngram)
    unigram = served.probs[0].numpy()[: ngram.vocab_size]
    bin_tables = {(n, b): tf.constant(tail_bins(unigram, n, b)) for n in list_sizes for b in bins}

    def at(p, index):  # p[row, index[row]]
        return tf.gather(p, index, batch_dims=1)

    @tf.function
    def step(context, target):
        target = tf.cast(target, tf.int64)
        p_nn = tf.nn.softmax(tf.cast(model(context, training=False), tf.float64))
        p_ng = served.distribution(tf.cast(context, tf.int64))
        ln_nn, ln_ng = tf.math.log(at(p_nn, target)), tf.math.log(at(p_ng, target))
        out = {"full": ln_nn, "ngram": ln_ng}
        for n in list_sizes:
            in_list, tail_word = target < n, tf.maximum(target - n, 0)
            list_nn, list_ng = tf.reduce_sum(p_nn[:, :n], axis=1), tf.reduce_sum(p_ng[:, :n], axis=1)
            out[f"backoff_{n}"] = tf.where(in_list, ln_nn - tf.math.log(list_nn) + tf.math.log(list_ng), ln_ng)
            for b in bins:
                table = bin_tables[n, b]
                word_bin = tf.cast(tf.gather(table, tail_word), tf.int64)

                def bin_mass(p):  # (batch,) the mass of each target's bin
                    return at(tf.transpose(tf.math.unsorted_segment_sum(tf.transpose(p[:, n:]), table, b)), word_bin)

                tail = tf.math.log(bin_mass(p_nn)) + ln_ng - tf.math.log(bin_mass(p_ng))
                out[f"class_{n}_{b}"] = tf.where(in_list, ln_nn, tail)
        return out

    parts: dict[str, list] = {}
    tokens = 0
    for context, target in dataset:
        for name, value in step(context, target).items():
            parts.setdefault(name, []).append(value.numpy())
        parts.setdefault("target", []).append(target.numpy())
        tokens += parts["target"][-1].size
        if progress:
            progress(tokens)
    return {name: np.concatenate(values) for name, values in parts.items()}


class Progress:
    """A line on standard error every 30 seconds: the tokens scored so far, of the split's."""

    def __init__(self, total: int, every: float = 30.0):
        import time

        self.total, self.every, self.clock = total, every, time.monotonic
        self.last = self.clock()

    def __call__(self, tokens: int) -> None:
        if self.clock() - self.last >= self.every:
            self.last = self.clock()
            print(
                f"scored {tokens:,} of {self.total:,} tokens ({tokens / self.total:.0%})", file=sys.stderr, flush=True
            )


def summary(log_probs: dict, list_sizes: list[int], bins: list[int]) -> dict:
    """Per N: the tail's share of tokens, nats per list and tail token, perplexities and their ratios."""
    import numpy as np

    def nats(name, rows):
        return round(float(-log_probs[name][rows].mean()), 4) if rows.any() else None

    def perplexity(name):
        return float(np.exp(-log_probs[name].mean()))

    full = perplexity("full")
    out = {"tokens": int(log_probs["target"].size), "perplexity": round(full, 2), "shortlists": {}}
    for n in list_sizes:
        tail = log_probs["target"] >= n
        modes = {f"class_{b}_bins" if b > 1 else "class": f"class_{n}_{b}" for b in bins} | {"backoff": f"backoff_{n}"}
        out["shortlists"][str(n)] = {
            "tail_fraction": round(float(tail.mean()), 4),
            "list_nats": {"full": nats("full", ~tail), "backoff": nats(f"backoff_{n}", ~tail)},
            "tail_nats": {"full": nats("full", tail), "ngram": nats("ngram", tail)}
            | {mode: nats(name, tail) for mode, name in modes.items() if mode != "backoff"},
            "perplexity": {mode: round(perplexity(name), 2) for mode, name in modes.items()},
            "ratio": {mode: round(perplexity(name) / full, 4) for mode, name in modes.items()},
        }
    return out


def main(argv, checked):
    from nplm_tf.training import tail as tail_lib
    from nplm_tf.training.data import eval_dataset, split_tokens

    list_sizes, bins, corpus = checked
    config, vocab, model = loading.load_trained(MODEL_DIR.value)
    ngram = tail_lib.tail_ngram(vocab, corpus, TAIL_ORDER.value or config.tail_order, NGRAM_DIR.value)
    print(f"scoring {SPLIT.value} with the network and the n-gram's whole distributions", flush=True)
    dataset = eval_dataset(corpus[SPLIT.value], vocab, config, model.head)
    log_probs = bound_log_probs(model, ngram, dataset, list_sizes, bins, Progress(split_tokens(corpus[SPLIT.value])))
    result = {
        "model_dir": MODEL_DIR.value,
        "split": SPLIT.value,
        "vocab_size": vocab.size,
        "tail_ngram_order": ngram.order,
    }
    print(json.dumps(result | summary(log_probs, list_sizes, bins)))


if __name__ == "__main__":
    app.run(main, check)
