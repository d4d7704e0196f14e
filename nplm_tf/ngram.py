"""Builds a count-based baseline on the network's pipeline and vocabulary.

    python -m nplm_tf.ngram --order=5 --output=runs/kn5            # Brown
    python -m nplm_tf.ngram --order=3 --output=DIR --corpus=files --train_files=...
    python -m nplm_tf.ngram --order=5 --output=runs/kn5p --prune=0,0,1   # without singletons of order 3 and up
    python -m nplm_tf.ngram --from_arpa=lm.arpa --output=runs/lmplz5   # a back-off model built elsewhere

Writes DIR/metrics.json (valid_perplexity, test_perplexity, as `train` does),
DIR/vocab.tsv, DIR/ngram.npz and DIR/model.arpa (loadable by KenLM / SRILM); --per_token, the test
split's probability of each token. With --from_arpa, the n-gram model is read from an ARPA file (KenLM's
lmplz, SRILM, IRSTLM) instead of counted, over the vocabulary the corpus flags give (docs/ngram_import.md).
"""

import json

from absl import flags

from nplm_tf.baselines import build
from pipelines import app, corpus_flags, files
from pipelines.errors import UserError
from pipelines.vocabulary import check_max_vocab

ORDER = flags.DEFINE_integer("order", 5, "n-gram order (1 or more).")
SMOOTHING = flags.DEFINE_enum(
    "smoothing",
    "kneser_ney",
    ["kneser_ney", "interpolated"],
    "kneser_ney: interpolated modified KN; interpolated: the paper's deleted-interpolation "
    "trigram, weights by EM on valid (needs --order=3).",
)
OUTPUT = app.define_path("output", None, "Directory for the model and metrics.json.", required=True)
MIN_COUNT = flags.DEFINE_integer("min_count", 4, "Words seen fewer times in train become <unk> (as in train).")
MAX_VOCAB = flags.DEFINE_integer(
    "max_vocab", 0, "At most this many types, </s> and <unk> included; the most frequent kept (as in train)."
)
ARPA = flags.DEFINE_boolean("arpa", True, "Also write model.arpa.")
PRUNE = flags.DEFINE_list(
    "prune",
    [],
    "Kneser-Ney only: drop the n-grams seen at most T_k times in train, T_k given per order from 1 and the "
    "last holding for the higher orders, as lmplz's --prune (0,0,1: the singleton trigrams and above); "
    "probabilities stay exactly normalized.",
)
FROM_ARPA = app.define_path(
    "from_arpa",
    None,
    "Read the model from this ARPA back-off file (any order; KenLM, SRILM, IRSTLM) instead of counting it; "
    "its words must be the vocabulary's that --corpus, --min_count and --max_vocab give (docs/ngram_import.md).",
)
UNK_TOKEN = flags.DEFINE_string(
    "unk_token", "<unk>", "With --from_arpa: the file's spelling of the unknown word (describe --write_text's)."
)
PER_TOKEN = app.define_path(
    "per_token",
    None,
    "Also write the test split's token<TAB>ln_prob<TAB>log10_prob per predicted token here, as "
    "`evaluate --per_token` does (`nplm_tf.compare` compares two such files).",
)


def check():
    """The flag values, and the corpus they name (its files exist), before TensorFlow loads."""
    files.check_output_dir("output", OUTPUT.value)
    if PER_TOKEN.value:
        files.check_output_file("per_token", PER_TOKEN.value)
    if MIN_COUNT.value < 1:
        raise UserError(f"min_count={MIN_COUNT.value} must be at least 1.")
    check_max_vocab(MAX_VOCAB.value)
    if FROM_ARPA.value:
        files.check_input_file("from_arpa", FROM_ARPA.value)
        given = [f"--{f.name}" for f in (ORDER, SMOOTHING, PRUNE) if f.present]
        if given:
            raise UserError(f"{', '.join(given)} cannot be given with --from_arpa: the file is the model.")
    elif UNK_TOKEN.present:
        raise UserError("--unk_token needs --from_arpa=FILE.")
    else:
        build.check_options(ORDER.value, SMOOTHING.value, PRUNE.value)
    return corpus_flags.corpus_from_flags()


def main(argv, corpus):
    if FROM_ARPA.value:
        args = (FROM_ARPA.value, OUTPUT.value, corpus, MIN_COUNT.value, MAX_VOCAB.value, UNK_TOKEN.value)
        metrics = build.import_arpa(*args, ARPA.value, PER_TOKEN.value)
    else:
        args = (ORDER.value, OUTPUT.value, corpus, MIN_COUNT.value, ARPA.value, SMOOTHING.value, MAX_VOCAB.value)
        metrics = build.train_ngram(*args, PER_TOKEN.value, PRUNE.value)
    print(json.dumps({k: metrics[k] for k in ("order", "valid_perplexity", "test_perplexity", "vocab_size")}))


def run():
    app.run(main, check, tensorflow=False)  # numpy and Python only


if __name__ == "__main__":
    run()
