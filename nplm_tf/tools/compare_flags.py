"""The flags of `nplm_tf.compare` and their checks: `define` defines them on behalf of the
binary (whose --help lists them), and the checks read them once parsed. Imported by the binary only.
"""

from __future__ import annotations

import os

from absl import flags

from pipelines import corpus, per_token, vocabulary
from pipelines.errors import UserError

flags.disclaim_key_flags()  # `define` defines the flags for its caller, the binary
FLAGS = flags.FLAGS


def define() -> None:
    """Defines `nplm_tf.compare`'s flags on behalf of the binary that calls it."""
    flags.DEFINE_string(
        "baseline",
        None,
        "Per-token scores of the baseline (a `--per_token` file, or `query`'s output); comma-separated files or globs "
        "for several runs of it.",
        required=True,
    )
    flags.DEFINE_string(
        "candidate",
        None,
        "Per-token scores of the candidate, on the same text (one run or several, as --baseline).",
        required=True,
    )
    flags.DEFINE_list(
        "bands",
        [],
        "Also compare within bands of word frequency: the vocabulary ids (most frequent words first) at which one band "
        "ends and the next begins, increasing; 4000 gives a 4,000-word short list's words and the rest.",
    )
    flags.DEFINE_string(
        "vocab",
        None,
        "With --bands and per-token files: the vocabulary the text was scored with, a vocab.tsv or the model (or "
        "n-gram) directory holding it (`query`'s output carries each word's id).",
    )
    flags.DEFINE_integer("samples", 1000, "Bootstrap resamplings of the units.")
    flags.DEFINE_integer("seed", 0, "Seed of the resampling.")
    flags.DEFINE_enum(
        "format",
        None,
        ["table", "json"],
        "Output: a table (default on a terminal) or one JSON line (default when piped).",
    )


def check():
    """The flag values, and every file read and matched token by token with the baseline's first."""
    if FLAGS.samples < 1:
        raise UserError(f"samples={FLAGS.samples} must be at least 1.")
    if FLAGS.seed < 0:
        raise UserError(f"seed={FLAGS.seed} must be >= 0.")
    edges = band_edges()
    vocab = read_vocab() if FLAGS.vocab is not None else None
    if vocab is not None and edges[-1] >= vocab.size:
        raise UserError(f"bands={','.join(FLAGS.bands)} must end below |V| = {vocab.size:,} of {FLAGS.vocab}.")
    first, baseline = per_token.read_runs(corpus.expand_files(FLAGS.baseline, "baseline"), "baseline")
    _, candidate = per_token.read_runs(corpus.expand_files(FLAGS.candidate, "candidate"), "candidate", first)
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
        ids = per_token.token_ids(words, kind, index, FLAGS.vocab)
    return words, baseline, candidate, edges, ids


def band_edges() -> list[int]:
    """--bands as increasing positive ids, or one sentence; --vocab only beside it."""
    if not FLAGS.bands:
        if FLAGS.vocab is not None:
            raise UserError("--vocab is read only with --bands; give --bands=4000, say, or leave --vocab out.")
        return []
    try:
        edges = [int(edge) for edge in FLAGS.bands]
    except ValueError:
        raise UserError(f"bands={','.join(FLAGS.bands)} must be whole numbers (vocabulary ids).") from None
    if edges[0] < 1 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise UserError(f"bands={','.join(FLAGS.bands)} must be positive and increasing.")
    return edges


def read_vocab():
    path = FLAGS.vocab
    if os.path.isdir(path):
        path = os.path.join(path, "vocab.tsv")
    return vocabulary.Vocabulary.load(path)
