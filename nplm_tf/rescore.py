"""Rescores Moses n-best lists with the model: appends each hypothesis's log10 probability as a feature.

    python -m nplm_tf.rescore --model_dir=runs/mlp9 < nbest.txt > rescored.txt
    python -m nplm_tf.rescore --model_dir=runs/mlp9 --ngram_dir=runs/kn5 --feature_name=NPLM < nbest.txt

Reads `id ||| hypothesis ||| feature scores ||| total` lines on standard input and writes them with
`NAME= log10P` appended to the feature scores (the hypothesis scored as one line: its words, then </s>, as
`nplm_tf.query` prints it in "Total:"). Hypotheses are scored in batches of --batch_lines. A line that is
not in this format is reported (a warning naming its line number) and left out; the others are written, and
the run ends with one sentence counting them and exit status 1. An n-gram directory given alone (as
--ngram_dir or --model_dir) scores as KenLM scores its file. A model directory that keeps a mixture
(`evaluate --save_mixture`) is scored with it unless --nomixture; the network is computed in NumPy (float32,
no TensorFlow) unless --precision names one.
"""

import sys

from absl import flags

from nplm_tf.core.config import ConfigError
from nplm_tf.tools import lines as lines_lib
from nplm_tf.tools import model_flags, nbest
from nplm_tf.tools.text_input import read_lines
from pipelines import app

MODEL_DIR = app.define_path(
    "model_dir", None, "A directory written by nplm_tf.train, or an nplm_tf.ngram directory to score with alone."
)
NGRAM_DIR = app.define_path(
    "ngram_dir", None, "Score with the network mixed with this nplm_tf.ngram model; alone, with the n-gram."
)
FEATURE_NAME = flags.DEFINE_string("feature_name", "NPLM", "Name of the appended feature.")
BATCH_LINES = flags.DEFINE_integer("batch_lines", 10_000, "Hypotheses read and scored together.")
MIXTURE, PRECISION = model_flags.numpy_scoring_flags()


def check():
    """The flag values and the kinds of the directories given, before any model (or TensorFlow) loads; returns
    `model_flags.scoring_models`'s (model_dir, ngram_dir, mode)."""
    if BATCH_LINES.value < 1:
        raise ConfigError(f"--batch_lines={BATCH_LINES.value} must be at least 1.")
    if not FEATURE_NAME.value or any(c.isspace() for c in FEATURE_NAME.value) or "=" in FEATURE_NAME.value:
        raise ConfigError(f"--feature_name={FEATURE_NAME.value!r} must be one word without '='.")
    return model_flags.scoring_models(MODEL_DIR.value, NGRAM_DIR.value, precision=PRECISION.value)


def main(argv, checked):
    if PRECISION.value is not None:
        app.import_tensorflow_quietly()

    model_dir, ngram_dir, mode = checked
    scorer = lines_lib.line_scorer(model_dir, ngram_dir, mode, PRECISION.value, MIXTURE.value)
    entries, bad = [], 0

    def flush():
        for entry, score in zip(entries, scorer.score([e.hypothesis for e in entries])):
            sys.stdout.write(entry.with_feature(FEATURE_NAME.value, score.total) + "\n")
        sys.stdout.flush()
        entries.clear()

    try:
        for number, line in enumerate(read_lines(), start=1):
            entry = nbest.parse(line)
            if entry is None:
                bad += 1
                print(
                    f"warning: line {number} is not an n-best line (id ||| hypothesis ||| features ||| total); "
                    "it is left out.",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            entries.append(entry)
            if len(entries) >= BATCH_LINES.value:
                flush()
    finally:
        flush()
    if bad:
        print(
            f"error: {bad:,} line(s) were not n-best lines and were left out; the others were rescored.",
            file=sys.stderr,
        )
        sys.exit(1)


def run():
    app.run(main, check, tensorflow=False)  # NumPy unless --precision


if __name__ == "__main__":
    run()
