"""Serving figures of an exported SavedModel, loaded as a server would load it.

    NLTK_DATA=../shared/nltk_data python -m benchmarks.serving --export=runs/brown_default/export/1

Prints one JSON line:
  next_word latency of single requests (one text, k=10) after warm-up, in the
  process: p50 / p99 in ms, over prefixes of the corpus's test split (Brown by default);
  score throughput at batch 64: predicted tokens per second, over the test split
  cut into 25-word requests;
  export size against the weights (float32) plus the vocabulary file.
"""

import json
import os

import numpy as np
from absl import flags

from benchmarks import serving_lib
from pipelines import app, corpus_flags
from pipelines import corpus as corpus_lib

EXPORT = flags.DEFINE_string("export", None, "An export version directory (holding saved_model.pb).", required=True)
REQUESTS = flags.DEFINE_integer("requests", 2000, "Timed next_word requests.")
BATCHES = flags.DEFINE_integer("batches", 40, "Timed score batches of 64 requests.")


def check_flags() -> None:
    from pipelines.errors import UserError

    for flag in (REQUESTS, BATCHES):
        if flag.value < 1:
            raise UserError(f"{flag.name}={flag.value} must be at least 1.")
    if not os.path.isfile(os.path.join(EXPORT.value, "saved_model.pb")):
        raise UserError(f"{EXPORT.value} holds no SavedModel (no saved_model.pb); pass an export version directory.")


def directory_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def main(argv, checked):
    import tensorflow as tf

    words = [w for line in corpus_flags.corpus_from_flags()["test"].iter_lines() for w in corpus_lib.tokenize(line)]
    figures = serving_lib.measure(EXPORT.value, words, REQUESTS.value, BATCHES.value)
    variables = tf.train.load_checkpoint(os.path.join(EXPORT.value, "variables", "variables"))
    shapes = variables.get_variable_to_shape_map()
    dtypes = variables.get_variable_to_dtype_map()
    weight_bytes = sum(
        int(np.prod(shapes[n])) * dtypes[n].size
        for n in shapes
        if dtypes[n] != tf.string and not n.startswith("_CHECKPOINTABLE")
    )
    vocab_bytes = os.path.getsize(os.path.join(EXPORT.value, "assets", "vocab.tsv"))
    total = directory_bytes(EXPORT.value)
    print(
        json.dumps(
            {
                "export": EXPORT.value,
                **figures,
                "export_bytes": total,
                "weights_bytes": weight_bytes,
                "vocab_bytes": vocab_bytes,
                "size_ratio": round(total / (weight_bytes + vocab_bytes), 4),
            }
        )
    )


if __name__ == "__main__":
    app.run(main, check_flags)
