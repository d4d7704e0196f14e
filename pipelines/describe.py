"""Prints one JSON line describing a corpus: predicted tokens per split, |V|, OOV rates.

    python -m pipelines.describe --corpus=brown [--shortlists=2000,4000,8000] [--write_text=DIR]

`--shortlists`: also the share of each split's predicted tokens a short list of N words (`train --shortlist=N`)
leaves to its tail. `--write_text=DIR`: also each split as the models read it (DIR/train.txt, valid.txt, test.txt;
a unit a line, tokens joined by single spaces, words outside the vocabulary as `--unk_token`), for another toolkit
(KenLM's `lmplz` and `query`, SRILM's `ngram-count`) to build and score its model on the same data and vocabulary.
"""

import errno
import json
import os

from absl import flags

from pipelines import app, corpus_flags, files, vocabulary
from pipelines.corpus import SPLITS
from pipelines.errors import UserError

MIN_COUNT = flags.DEFINE_integer("min_count", 4, "Words seen fewer times in train become <unk>.")
MAX_VOCAB = flags.DEFINE_integer(
    "max_vocab", 0, "At most this many types, </s> and <unk> included; the most frequent kept (as in train)."
)
SHORTLISTS = flags.DEFINE_list("shortlists", [], "Short-list sizes N: report the share of tokens in each one's tail.")
WRITE_TEXT = app.define_path(
    "write_text",
    None,
    "Also write the splits as the models read them into this directory (train.txt, valid.txt, test.txt: one "
    "unit a line, words outside the vocabulary as --unk_token), for another toolkit; never overwrites.",
)
UNK_TOKEN = flags.DEFINE_string(
    "unk_token",
    "<unk>",
    "With --write_text: how a word outside the vocabulary is written (KenLM's lmplz refuses <unk> in its input: "
    "give it a word of its own, such as UNKWORD).",
)


def check():
    """The flag values, and the corpus they name (its files exist), before TensorFlow loads."""
    if MIN_COUNT.value < 1:
        raise UserError(f"min_count={MIN_COUNT.value} must be at least 1.")
    vocabulary.check_max_vocab(MAX_VOCAB.value)
    check_write_text()
    return corpus_flags.corpus_from_flags(), app.positive_ints(SHORTLISTS)


def check_write_text() -> None:
    """--write_text and --unk_token, before the corpus is read: a directory that would be overwritten or an
    unk token that is not one token is refused."""
    token = UNK_TOKEN.value
    if WRITE_TEXT.value is None:
        if UNK_TOKEN.present:
            raise UserError("--unk_token needs --write_text=DIR.")
        return
    if not token or token != "".join(token.split()):
        raise UserError(f"--unk_token={token!r} must be one token: not empty, no whitespace.")
    files.check_output_dir("write_text", WRITE_TEXT.value)
    there = [name for name in SPLITS if os.path.exists(os.path.join(WRITE_TEXT.value, f"{name}.txt"))]
    if there:
        raise UserError(
            f"--write_text={WRITE_TEXT.value} already holds {there[0]}.txt; give a directory without it (nothing "
            "is overwritten)."
        )


def main(argv, checked):
    corpus, shortlists = checked
    vocab = vocabulary.build(corpus["train"], MIN_COUNT.value, MAX_VOCAB.value)
    app.positive_ints(SHORTLISTS, vocab.size)
    summary = vocabulary.corpus_summary(corpus, vocab, shortlists)
    if WRITE_TEXT.value is not None:
        try:  # only the check: a corpus error while writing is a ValueError too (UserError), with its own sentence
            vocabulary.check_unk_token(vocab, UNK_TOKEN.value)
        except ValueError:
            raise UserError(
                f"--unk_token={UNK_TOKEN.value} is a word of the vocabulary, so the written text could not tell "
                "them apart; give another."
            ) from None
        try:
            vocabulary.write_splits(corpus, vocab, WRITE_TEXT.value, UNK_TOKEN.value)
        except OSError as e:
            if e.errno == errno.ENOSPC:  # a full disk: `app`'s sentence
                raise
            raise UserError(
                f"--write_text={WRITE_TEXT.value} cannot be written ({e.strerror}); give a writable directory."
            ) from None
        summary["text_dir"] = os.path.abspath(WRITE_TEXT.value)
    print(json.dumps(summary))


def run():
    app.run(main, check, tensorflow=False)  # numpy and Python only


if __name__ == "__main__":
    run()
