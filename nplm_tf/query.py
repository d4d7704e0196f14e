"""Scores sentences from standard input the way KenLM's `query` does: each word, each line, the perplexity.

    echo "The jury said it did find that" | python -m nplm_tf.query --model_dir=runs/mlp9
    python -m nplm_tf.query --model_dir=runs/mlp9 --ngram_dir=runs/kn5 < sentences.txt     # the mixture
    python -m nplm_tf.query --ngram_dir=runs/kn5 < sentences.txt       # an n-gram alone, as KenLM's query

Each line is scored as one unit (its words, then </s>) and printed as

    word=id n log10P <TAB> ... </s>=0 n log10P <TAB> Total: log10P OOV: count

then, after the last line, "Perplexity including OOVs", "Perplexity excluding OOVs", "OOVs" and "Tokens".
Differences from KenLM: ids are this model's (`</s>` = 0, `<unk>` = 1); for a network (or a mixture) n is the
number of words the network saw, the predicted one included (min(position + 1, order)); for an n-gram alone it
is the length of the n-gram matched, as KenLM's. A blank line is an empty sentence, `</s>` alone, as in KenLM.
An n-gram directory (`nplm_tf.ngram`, an imported ARPA file included) is scored alone when it is the only model
given, as --ngram_dir or as --model_dir; --ngram_only scores a network's --ngram_dir alone. A model directory
that keeps a mixture (`evaluate --save_mixture`) is scored with it unless --nomixture. The network is computed
in NumPy (float32, no TensorFlow) unless --precision names one.
"""

from absl import flags

from nplm_tf.core.config import ConfigError
from nplm_tf.tools import lines as lines_lib
from nplm_tf.tools import model_flags
from nplm_tf.tools.text_input import read_lines
from pipelines import app

MODEL_DIR = app.define_path(
    "model_dir", None, "A directory written by nplm_tf.train, or an nplm_tf.ngram directory to score with alone."
)
NGRAM_DIR = app.define_path(
    "ngram_dir",
    None,
    "An nplm_tf.ngram directory: with --model_dir, score with the network mixed with it (weights fitted on "
    "valid); alone, score with the n-gram.",
)
NGRAM_ONLY = flags.DEFINE_boolean("ngram_only", False, "With --ngram_dir: score with the n-gram alone (λ = 0).")
BATCH_LINES = flags.DEFINE_integer("batch_lines", 10_000, "Lines read and scored together.")
MIXTURE, PRECISION = model_flags.numpy_scoring_flags()


def check():
    """The flag values and the kinds of the directories given, before any model (or TensorFlow) loads; returns
    `model_flags.scoring_models`'s (model_dir, ngram_dir, mode)."""
    if BATCH_LINES.value < 1:
        raise ConfigError(f"--batch_lines={BATCH_LINES.value} must be at least 1.")
    return model_flags.scoring_models(MODEL_DIR.value, NGRAM_DIR.value, NGRAM_ONLY.value, precision=PRECISION.value)


def main(argv, checked):
    if PRECISION.value is not None:
        app.import_tensorflow_quietly()

    model_dir, ngram_dir, mode = checked
    scorer = lines_lib.line_scorer(model_dir, ngram_dir, mode, PRECISION.value, MIXTURE.value)
    order = scorer.ngram.order if scorer.mode == "ngram" else scorer.config.order
    total, tokens, oov_total, oov_tokens = 0.0, 0, 0.0, 0
    batch = []

    def flush():
        nonlocal total, tokens, oov_total, oov_tokens
        for score in scorer.score(batch):
            print(lines_lib.kenlm_line(score, order), flush=False)
            total += score.total
            tokens += len(score.ids)
            unknown = score.ids == 1
            oov_total += float(score.log10[unknown].sum())
            oov_tokens += int(unknown.sum())
        batch.clear()

    try:
        for line in read_lines():
            batch.append(line)
            if len(batch) >= BATCH_LINES.value:
                flush()
    finally:  # the lines read before an error are still scored and printed
        flush()
    known = tokens - oov_tokens
    perplexity = lambda t, n: f"{10 ** (-t / n):.10g}" if n else "undefined (no tokens)"  # noqa: E731
    print(f"Perplexity including OOVs:\t{perplexity(total, tokens)}")
    print(f"Perplexity excluding OOVs:\t{perplexity(total - oov_total, known)}")
    print(f"OOVs:\t{oov_tokens}")
    print(f"Tokens:\t{tokens}")


def run():
    app.run(main, check, tensorflow=False)  # NumPy unless --precision


if __name__ == "__main__":
    run()
