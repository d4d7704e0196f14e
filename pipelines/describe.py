"""Prints one JSON line describing a corpus: predicted tokens per split, |V|, OOV rates.

python -m pipelines.describe --corpus=brown
"""

import json

from absl import flags

from pipelines import app, corpus_flags
from pipelines.errors import UserError

MIN_COUNT = flags.DEFINE_integer("min_count", 4, "Words seen fewer times in train become <unk>.")


def check():
    """The flag values, and the corpus they name (its files exist), before TensorFlow loads."""
    if MIN_COUNT.value < 1:
        raise UserError(f"min_count={MIN_COUNT.value} must be at least 1.")
    return corpus_flags.corpus_from_flags()


def main(argv, corpus):
    from pipelines import vocabulary

    vocab = vocabulary.build(corpus["train"], MIN_COUNT.value)
    known = set(vocab.words)
    summary = {"corpus": corpus.name, "vocab_size": vocab.size, "tokens": {}, "lines": {}, "oov_rate": {}}
    for name in ("train", "valid", "test"):
        counts, tokens, lines = vocabulary.count_split(corpus[name])
        unknown = sum(c for w, c in counts.items() if w not in known)
        summary["tokens"][name] = tokens + lines  # every line also predicts </s>
        summary["lines"][name] = lines
        summary["oov_rate"][name] = unknown / (tokens + lines) if tokens else 0.0
    print(json.dumps(summary))


def run():
    app.run(main, check)


if __name__ == "__main__":
    run()
