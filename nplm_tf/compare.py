"""Compares two models' per-token scores of the same text: perplexities, ratio, and a bootstrap interval.

    python -m nplm_tf.ngram --order=5 --output=runs/kn5 --per_token=runs/kn5_test.tsv
    python -m nplm_tf.evaluate --model_dir=runs/mlp9 --per_token=runs/mlp9_test.tsv
    python -m nplm_tf.compare --baseline=runs/kn5_test.tsv --candidate=runs/mlp9_test.tsv
    python -m nplm_tf.compare --baseline=kn5_query.txt --candidate=mlp9_query.txt    # two `query` outputs
    python -m nplm_tf.compare --baseline='runs/full_*_test.tsv' --candidate='runs/sl_*_test.tsv'   # runs of each

Prints a short table on a terminal, and one JSON line when piped or with --format=json: both perplexities, `ratio` (the candidate's perplexity over the baseline's), and
`ratio_95`, the middle 95% of that ratio over --samples resamplings of the text's units (its lines; Brown's
texts) with replacement, each unit's tokens kept together, the same units for both models (a paired
bootstrap). An interval that excludes 1 says the difference is larger than the choice of test units
explains. `candidate_better_share` is the share of resamplings in which the candidate's perplexity is lower;
`units_candidate_better` counts the units it scores higher. Two outputs of `nplm_tf.query` on the same
text (the network, `--ngram_dir --ngram_only` for the n-gram, `--ngram_dir` for the mixture) compare the
same way, one unit per line of the text.

Each flag takes comma-separated files or globs: several runs of one model (training seeds, say), all scoring
the same text. A model's perplexity is then its runs' geometric mean (`baseline_perplexity_runs` lists each
run's), and each resampling also draws each model's runs with replacement, so that the interval covers the
run-to-run spread of training as well as the choice of test units (a draw's distance from the runs' mean
scaled by sqrt(R / (R - 1)), so that it varies by their unbiased variance). One run a model cannot see that
spread, and two or three see it only roughly (their variance is estimated from R - 1 degrees of freedom):
`benchmarks.compare_coverage` measures how often the interval holds the true ratio at Brown's seed spread.

`--bands=EDGES` adds `bands`: the same comparison within bands of word frequency, cut at the vocabulary ids
EDGES (the vocabulary is sorted by train count, so `--bands=4000` splits a 4,000-word short list's words from
the tail). Each band gives its `ids` (the first, and the end, which is not in it; null: the vocabulary's
end), its tokens and their share, both perplexities on them, their ratio and its interval
(the same resamplings), and `ln_ratio_part`, the band's part of ln(ratio): the parts add up to it, and say
where the difference comes from. Per-token files need `--vocab` (the model's directory); `query`'s output
carries the ids:

    python -m nplm_tf.compare --baseline=runs/mlp9_test.tsv --candidate=runs/sl_test.tsv \
        --bands=4000 --vocab=runs/mlp9
"""

import json
import os

from absl import flags

from pipelines import app, corpus, per_token, tables, vocabulary
from pipelines.errors import UserError

BASELINE = flags.DEFINE_string(
    "baseline",
    None,
    "Per-token scores of the baseline (a `--per_token` file, or `query`'s output); comma-separated files or globs "
    "for several runs of it.",
    required=True,
)
CANDIDATE = flags.DEFINE_string(
    "candidate",
    None,
    "Per-token scores of the candidate, on the same text (one run or several, as --baseline).",
    required=True,
)
BANDS = flags.DEFINE_list(
    "bands",
    [],
    "Also compare within bands of word frequency: the vocabulary ids (most frequent words first) at which one band "
    "ends and the next begins, increasing; 4000 gives a 4,000-word short list's words and the rest.",
)
VOCAB = flags.DEFINE_string(
    "vocab",
    None,
    "With --bands and per-token files: the vocabulary the text was scored with, a vocab.tsv or the model (or "
    "n-gram) directory holding it (`query`'s output carries each word's id).",
)
SAMPLES = flags.DEFINE_integer("samples", 1000, "Bootstrap resamplings of the units.")
SEED = flags.DEFINE_integer("seed", 0, "Seed of the resampling.")
FORMAT = flags.DEFINE_enum(
    "format", None, ["table", "json"], "Output: a table (default on a terminal) or one JSON line (default when piped)."
)


def check():
    """The flag values, and every file read and matched token by token with the baseline's first."""
    if SAMPLES.value < 1:
        raise UserError(f"samples={SAMPLES.value} must be at least 1.")
    if SEED.value < 0:
        raise UserError(f"seed={SEED.value} must be >= 0.")
    edges = band_edges()
    vocab = read_vocab() if VOCAB.value is not None else None
    if vocab is not None and edges[-1] >= vocab.size:
        raise UserError(f"bands={','.join(BANDS.value)} must end below |V| = {vocab.size:,} of {VOCAB.value}.")
    first, baseline = per_token.read_runs(corpus.expand_files(BASELINE.value, "baseline"), "baseline")
    _, candidate = per_token.read_runs(corpus.expand_files(CANDIDATE.value, "candidate"), "candidate", first)
    path, words, kind = first
    ids = None
    if edges:
        if kind == "per-token" and vocab is None:
            raise UserError(
                f"--bands with per-token files ({path}) needs --vocab, the vocabulary the text was scored with "
                "(the model's directory, say)."
            )
        if kind == "query" and vocab is not None:
            raise UserError("--vocab is for per-token files; `query`'s output carries each word's id.")
        index = {w: i for i, w in enumerate(vocab.words)} if vocab is not None else None
        ids = per_token.token_ids(words, kind, index, VOCAB.value)
    return words, baseline, candidate, edges, ids


def band_edges() -> list[int]:
    """--bands as increasing positive ids, or one sentence; --vocab only beside it."""
    if not BANDS.value:
        if VOCAB.value is not None:
            raise UserError("--vocab is read only with --bands; give --bands=4000, say, or leave --vocab out.")
        return []
    try:
        edges = [int(edge) for edge in BANDS.value]
    except ValueError:
        raise UserError(f"bands={','.join(BANDS.value)} must be whole numbers (vocabulary ids).") from None
    if edges[0] < 1 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise UserError(f"bands={','.join(BANDS.value)} must be positive and increasing.")
    return edges


def read_vocab():
    path = VOCAB.value
    if os.path.isdir(path):
        path = os.path.join(path, "vocab.tsv")
    return vocabulary.Vocabulary.load(path)


def main(argv, checked):
    words, baseline, candidate, edges, ids = checked
    result = per_token.compare(words, baseline, candidate, SAMPLES.value, SEED.value)
    if edges:
        result["bands"] = per_token.by_band(words, ids, baseline, candidate, edges, SAMPLES.value, SEED.value)
    if (FORMAT.value or ("table" if tables.on_terminal() else "json")) == "json":
        print(json.dumps(result))
    else:
        print(per_token.summary_table(result))


def run():
    app.run(main, check, tensorflow=False)  # numpy and Python only


if __name__ == "__main__":
    run()
