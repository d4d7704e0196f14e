"""Prints one JSON line describing a corpus: predicted tokens per split, |V|, OOV rates.

python -m pipelines.describe --corpus=brown [--shortlists=2000,4000,8000]

With `--shortlists`, also the share of each split's predicted tokens that a short list of N words
(`nplm_tf.train --shortlist=N`: ids 0..N-1, `</s>` and `<unk>` included) leaves to the tail, to choose N
before training.
"""

import json

from absl import flags

from pipelines import app, corpus_flags
from pipelines.errors import UserError

MIN_COUNT = flags.DEFINE_integer("min_count", 4, "Words seen fewer times in train become <unk>.")
MAX_VOCAB = flags.DEFINE_integer(
    "max_vocab", 0, "At most this many types, </s> and <unk> included; the most frequent kept (as in train)."
)
SHORTLISTS = flags.DEFINE_list("shortlists", [], "Short-list sizes N: report the share of tokens in each one's tail.")


def check():
    """The flag values, and the corpus they name (its files exist), before TensorFlow loads."""
    from pipelines import vocabulary

    if MIN_COUNT.value < 1:
        raise UserError(f"min_count={MIN_COUNT.value} must be at least 1.")
    vocabulary.check_max_vocab(MAX_VOCAB.value)
    return corpus_flags.corpus_from_flags(), app.positive_ints(SHORTLISTS)


def main(argv, checked):
    from pipelines import vocabulary

    corpus, shortlists = checked
    vocab = vocabulary.build(corpus["train"], MIN_COUNT.value, MAX_VOCAB.value)
    app.positive_ints(SHORTLISTS, vocab.size)
    summary = {"corpus": corpus.name, "vocab_size": vocab.size, "tokens": {}, "lines": {}, "oov_rate": {}}
    if shortlists:
        summary["tail_share"] = {str(n): {} for n in shortlists}
    for name in ("train", "valid", "test"):
        counts, tokens, lines = vocabulary.count_split(corpus[name])
        unknown = vocab.unknown(counts)  # a literal </s> or <unk> in the text too, as in training
        predicted = tokens + lines  # every line also predicts </s>
        summary["tokens"][name] = predicted
        summary["lines"][name] = lines
        summary["oov_rate"][name] = unknown / predicted if tokens else 0.0
        if shortlists:
            ids = vocab.ids(counts)  # as training maps them: unknown words (in the list) are <unk>
            for n in shortlists:
                tail = sum(c for i, c in zip(ids, counts.values()) if i >= n)
                summary["tail_share"][str(n)][name] = tail / predicted if tokens else 0.0
    print(json.dumps(summary))


def run():
    app.run(main, check, tensorflow=False)  # numpy and Python only


if __name__ == "__main__":
    run()
