"""Compares two models' per-token scores of the same text: perplexities, ratio, and a bootstrap interval.

    python -m nplm_tf.ngram --order=5 --output=runs/kn5 --per_token=runs/kn5_test.tsv
    python -m nplm_tf.evaluate --model_dir=runs/mlp9 --per_token=runs/mlp9_test.tsv
    python -m nplm_tf.compare --baseline=runs/kn5_test.tsv --candidate=runs/mlp9_test.tsv
    python -m nplm_tf.compare --baseline=kn5_query.txt --candidate=mlp9_query.txt    # two `query` outputs
    python -m nplm_tf.compare --baseline='runs/full_*_test.tsv' --candidate='runs/sl_*_test.tsv'   # runs of each

Prints one JSON line: both perplexities, `ratio` (the candidate's perplexity over the baseline's), and
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
in simulation at Brown's seed spread (`benchmarks.compare_coverage`), the 95% interval held the true ratio
in 80% of trials from one run a model, 90% from two, 93% from three and 94% from five.
"""

import json

from absl import flags

from pipelines import app
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
SAMPLES = flags.DEFINE_integer("samples", 1000, "Bootstrap resamplings of the units.")
SEED = flags.DEFINE_integer("seed", 0, "Seed of the resampling.")


def check():
    """The flag values, and every file read and matched token by token with the baseline's first."""
    from nplm_tf.tools import per_token
    from pipelines import corpus

    if SAMPLES.value < 1:
        raise UserError(f"samples={SAMPLES.value} must be at least 1.")
    if SEED.value < 0:
        raise UserError(f"seed={SEED.value} must be >= 0.")
    first, baseline = per_token.read_runs(corpus.expand_files(BASELINE.value, "baseline"), "baseline")
    _, candidate = per_token.read_runs(corpus.expand_files(CANDIDATE.value, "candidate"), "candidate", first)
    return first[1], baseline, candidate


def main(argv, checked):
    from nplm_tf.tools import per_token

    words, baseline, candidate = checked
    print(json.dumps(per_token.compare(words, baseline, candidate, SAMPLES.value, SEED.value)))


def run():
    app.run(main, check, tensorflow=False)  # numpy and Python only


if __name__ == "__main__":
    run()
