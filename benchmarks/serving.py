"""Serving figures of exported SavedModels, loaded as a server would load them.

    NLTK_DATA=../shared/nltk_data python -m benchmarks.serving --export=runs/brown_default/export/1
    NLTK_DATA=../shared/nltk_data python -m benchmarks.serving --export=A/export/1 --against=B/export/1

Prints one JSON line per export:
  next_word latency of single requests (one text, k=10) after warm-up, in the
  process: p50 / p99 in ms, over prefixes of the corpus's test split (Brown by default);
  score throughput at batch 64: predicted tokens per second, over the test split
  cut into 25-word requests;
  generate's tokens per second (words and `</s>`) with its defaults (temperature 1, every word; up
  to 20 words from 8-word prompts of the test split), for one prompt and for 64
  (`--generations=0` leaves it out);
  export size against the weights (float32) plus the vocabulary file.
With `--against`, the exports are timed in turn in `--rounds` rounds (the host's
drift spreads over all of them; compare them within a round: `score_rounds`,
`next_word_p50_rounds`, `generate_rounds`).
"""

import json
import os

import numpy as np
from absl import flags

from benchmarks import serving_lib
from pipelines import app, corpus_flags
from pipelines import corpus as corpus_lib

EXPORT = app.define_path("export", None, "An export version directory (holding saved_model.pb).", required=True)
AGAINST = flags.DEFINE_list("against", [], "Other export version directories, timed in turn with --export.")
REQUESTS = flags.DEFINE_integer("requests", 2000, "Timed next_word requests.")
BATCHES = flags.DEFINE_integer("batches", 40, "Timed score batches of 64 requests.")
GENERATIONS = flags.DEFINE_integer("generations", 20, "Timed generate calls of each kind (one prompt; 64); 0: none.")
ROUNDS = flags.DEFINE_integer("rounds", 5, "With --against: rounds, each timing a share of every export's requests.")


def check_flags() -> list[str]:
    """The test split's words that the requests are cut from, once they and the flag values are checked
    (before TensorFlow loads)."""
    from pipelines.errors import UserError

    for flag in (REQUESTS, BATCHES):
        if flag.value < 1:
            raise UserError(f"{flag.name}={flag.value} must be at least 1.")
    if GENERATIONS.value < 0:
        raise UserError(f"generations={GENERATIONS.value} must be at least 0.")
    if AGAINST.value and not 1 <= ROUNDS.value <= min(REQUESTS.value, BATCHES.value):
        raise UserError(
            f"rounds={ROUNDS.value} must be at least 1 and at most requests={REQUESTS.value} and batches={BATCHES.value}."
        )
    if AGAINST.value and 0 < GENERATIONS.value < ROUNDS.value:
        raise UserError(f"generations={GENERATIONS.value} must be 0 or at least rounds={ROUNDS.value}.")
    for export in [EXPORT.value, *AGAINST.value]:
        if not os.path.isfile(os.path.join(export, "saved_model.pb")):
            raise UserError(f"{export} holds no SavedModel (no saved_model.pb); pass an export version directory.")
    split = corpus_flags.corpus_from_flags()["test"]
    corpus_lib.check_split(split, order=1)
    words = [w for line in split.iter_lines() for w in corpus_lib.tokenize(line)]
    if len(words) < serving_lib.MIN_WORDS:
        raise UserError(
            f"the test split has {len(words)} words; the requests are cut from at least {serving_lib.MIN_WORDS}."
        )
    return words


def directory_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def sizes(export: str) -> dict:
    """The export's bytes against its weights' (float32) and its vocabulary's."""
    import tensorflow as tf

    variables = tf.train.load_checkpoint(os.path.join(export, "variables", "variables"))
    shapes = variables.get_variable_to_shape_map()
    dtypes = variables.get_variable_to_dtype_map()
    weight_bytes = sum(
        int(np.prod(shapes[n])) * dtypes[n].size
        for n in shapes
        if dtypes[n] != tf.string and not n.startswith("_CHECKPOINTABLE")
    )
    vocab_bytes = os.path.getsize(os.path.join(export, "assets", "vocab.tsv"))
    total = directory_bytes(export)
    return {
        "export_bytes": total,
        "weights_bytes": weight_bytes,
        "vocab_bytes": vocab_bytes,
        "size_ratio": round(total / (weight_bytes + vocab_bytes), 4),
    }


def main(argv, words):
    exports = list(dict.fromkeys([EXPORT.value, *AGAINST.value]))
    if len(exports) == 1:
        figures = {
            EXPORT.value: serving_lib.measure(EXPORT.value, words, REQUESTS.value, BATCHES.value, GENERATIONS.value)
        }
    else:
        figures = serving_lib.measure_alternated(
            {e: e for e in exports}, words, REQUESTS.value, BATCHES.value, ROUNDS.value, generations=GENERATIONS.value
        )
    for export in exports:
        print(json.dumps({"export": export, **figures[export], **sizes(export)}))


if __name__ == "__main__":
    app.run(main, check_flags)
