"""Exact perplexity of a trained model on a corpus split or on files.

    python -m nplm_tf.evaluate --model_dir=DIR                  # the test split of its own corpus
    python -m nplm_tf.evaluate --model_dir=DIR --files='x/*.txt' --per_token=out.tsv
    python -m nplm_tf.evaluate --model_dir=DIR --ngram_dir=KN --save_mixture   # fit, report, and keep the fit
    python -m nplm_tf.evaluate --nplm_model=FILE --per_token=out.tsv   # a model trained by the nplm toolkit
    python -m nplm_tf.evaluate --model_dirs='runs/s*' --ngram_dir=runs/kn5,runs/kn3   # an ensemble

Prints the perplexity, tokens and OOV rate (and with --ngram_dir the mixtures' perplexities): a short table
on a terminal, one JSON line when piped or with --format=json. --per_token writes one line per predicted
token: the token (as the vocabulary sees it), ln P and log10 P (the network's; with --ngram_dir,
--mixture_per_token writes the mixture's, and `nplm_tf.compare` compares two such files).

The mixture's weights are fitted on the valid split and reported; nothing in DIR changes unless
--save_mixture, which keeps the fit as DIR/mixture.json: `query`, `rescore`, `generate` and the next `export`
of DIR then serve the mixture (each with --nomixture leaves it out).

--nplm_model scores with a model file of the USC/ISI nplm toolkit (one tanh hidden layer, `num_hidden 0`:
what equation (1) covers) instead of a model directory, on --files or the corpus flags' split, tokenized as
ours; its --per_token file compares with ours by `nplm_tf.compare`.

--model_dirs mixes several networks (any heads and shapes, one vocabulary) and the n-grams of --ngram_dir
(comma-separated) linearly, weights uniform, by EM on valid, and per context frequency (`tools/ensemble.py`),
in NumPy; --per_token writes the ensemble's, and --save_ensemble=FILE keeps the fit. --cache=0.999 adds a
cache of the text so far (`baselines/cache.py`: a unigram model of the document's words so far, SRILM's
`-cache`) as one more member: a document is a Brown text, or the lines of a file between blank lines; a text
with no blank line gets the last --cache_window words, across lines. No served model keeps it.
"""

import json
import sys

from absl import flags

from nplm_tf.baselines import network_mixture
from nplm_tf.tools import ensemble, evaluate_flags, evaluation
from nplm_tf.tools.evaluate_flags import check, output_form
from pipelines import app

evaluate_flags.define()  # this binary's own flags: its --help lists them
FLAGS = flags.FLAGS


def evaluate_ensemble(corpus, split, model_dirs, ngram_dirs, decays) -> None:
    members = ensemble.Members.load(model_dirs, ngram_dirs, decays, FLAGS.cache_window)
    report, fit = evaluation.score_ensemble(members, corpus, split, FLAGS.per_token)
    print(json.dumps(report) if output_form() == "json" else evaluation.ensemble_table(report), flush=True)
    if FLAGS.save_ensemble:
        ensemble.save_fit(FLAGS.save_ensemble, fit)
        print(f"saved the ensemble's weights in {FLAGS.save_ensemble}.", file=sys.stderr)


def main(argv, checked):
    if FLAGS.model_dirs:
        evaluate_ensemble(*checked)
        return
    if FLAGS.nplm_model:
        evaluate_nplm(checked[1])
        return
    app.import_tensorflow_quietly()
    corpus, split = checked
    progress = sys.stderr.isatty() if FLAGS.progress is None else FLAGS.progress
    summary, fit = evaluation.score_network(
        FLAGS.model_dir,
        corpus,
        split,
        FLAGS.ngram_dir,
        FLAGS.per_token,
        FLAGS.mixture_per_token,
        FLAGS.precision,
        progress,
    )
    print(json.dumps(summary) if output_form() == "json" else evaluation.summary_table(summary), flush=True)
    if FLAGS.ngram_dir:
        if FLAGS.save_mixture:
            saved = network_mixture.save_fit(FLAGS.model_dir, {"fit": fit})
            print(
                f"saved the weights per context frequency in {saved}: query, rescore, generate and the next export "
                f"of {FLAGS.model_dir} now serve the mixture with {fit['ngram_dir']} (--nomixture leaves it out).",
                file=sys.stderr,
            )
        else:
            print(
                f"note: nothing was saved; --save_mixture keeps this fit in {FLAGS.model_dir}, whose tools and "
                "exports then serve the mixture.",
                file=sys.stderr,
            )


def evaluate_nplm(split) -> None:
    summary = evaluation.score_nplm(FLAGS.nplm_model, split, FLAGS.per_token)
    print(json.dumps(summary) if output_form() == "json" else evaluation.summary_table(summary), flush=True)


def run():
    app.run(main, check, tensorflow=False)  # loaded in `main`, where a model directory is scored


if __name__ == "__main__":
    run()
