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

from absl import flags

from nplm_tf.tools import compare_flags
from nplm_tf.tools.compare_flags import check
from pipelines import app, per_token, tables

compare_flags.define()  # this binary's own flags: its --help lists them
FLAGS = flags.FLAGS


def main(argv, checked):
    words, baseline, candidate, edges, ids = checked
    result = per_token.compare(words, baseline, candidate, FLAGS.samples, FLAGS.seed)
    if edges:
        result["bands"] = per_token.by_band(words, ids, baseline, candidate, edges, FLAGS.samples, FLAGS.seed)
    if (FLAGS.format or ("table" if tables.on_terminal() else "json")) == "json":
        print(json.dumps(result))
    else:
        print(per_token.summary_table(result))


def run():
    app.run(main, check, tensorflow=False)  # numpy and Python only


if __name__ == "__main__":
    run()
