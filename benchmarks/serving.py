"""Serving figures of an exported SavedModel, loaded as a server would load it.

    NLTK_DATA=../shared/nltk_data python -m benchmarks.serving --export=runs/brown_default/export/1

Prints one JSON line:
  next_word latency of single requests (one text, k=10) after warm-up, in the
  process: p50 / p99 in ms, over Brown test prefixes;
  score throughput at batch 64: predicted tokens per second, over Brown test
  cut into 25-word requests;
  export size against the weights (float32) plus the vocabulary file.
"""

import json
import os
import time

import numpy as np
from absl import app, flags

EXPORT = flags.DEFINE_string("export", None, "An export version directory (holding saved_model.pb).", required=True)
REQUESTS = flags.DEFINE_integer("requests", 2000, "Timed next_word requests.")
BATCHES = flags.DEFINE_integer("batches", 40, "Timed score batches of 64 requests.")


def directory_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def main(argv):
    import tensorflow as tf

    from pipelines import corpus as corpus_lib

    words = [w for line in corpus_lib.brown_corpus()["test"].iter_lines() for w in corpus_lib.tokenize(line)]
    rng = np.random.default_rng(0)
    served = tf.saved_model.load(EXPORT.value)
    next_word, score = served.signatures["next_word"], served.signatures["score"]

    prefixes = [
        " ".join(words[s : s + n])
        for s, n in zip(
            rng.integers(0, len(words) - 20, REQUESTS.value + 100), rng.integers(1, 20, REQUESTS.value + 100)
        )
    ]
    k = tf.constant(10)
    latencies = []
    for i, text in enumerate(prefixes):
        t = tf.constant([text])
        start = time.perf_counter()
        next_word(text=t, k=k)["words"].numpy()
        if i >= 100:  # warm-up
            latencies.append(time.perf_counter() - start)
    ms = np.array(latencies) * 1e3

    pieces = [" ".join(words[s : s + 25]) for s in range(0, len(words) - 25, 25)]
    batches = [tf.constant(pieces[i : i + 64]) for i in range(0, 64 * (BATCHES.value + 3), 64)]
    for b in batches[:3]:
        score(text=b)["log_prob"].numpy()
    tokens, start = 0, time.perf_counter()
    for b in batches[3:]:
        tokens += int(score(text=b)["lengths"].numpy().sum())
    seconds = time.perf_counter() - start

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
                "next_word_ms": {
                    "p50": round(float(np.percentile(ms, 50)), 3),
                    "p99": round(float(np.percentile(ms, 99)), 3),
                    "mean": round(float(ms.mean()), 3),
                    "requests": len(latencies),
                },
                "score_tokens_per_second": round(tokens / seconds),
                "score_batch": 64,
                "score_tokens": tokens,
                "export_bytes": total,
                "weights_bytes": weight_bytes,
                "vocab_bytes": vocab_bytes,
                "size_ratio": round(total / (weight_bytes + vocab_bytes), 4),
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
