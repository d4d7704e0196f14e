"""The input pipeline alone: tokens/s and peak memory, on Brown and on Brown ×K.

    NLTK_DATA=../shared/nltk_data python -m benchmarks.pipeline --repeat=10

Each measurement runs in a fresh process (so its peak RSS is its own): Brown's
train split as one file, then the same text repeated --repeat times, both
streamed from disk through the training pipeline (shuffled, batch 256).
Memory that does not grow with corpus size shows as equal peak RSS.
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from absl import flags

from pipelines import app

REPEAT = flags.DEFINE_integer("repeat", 10, "How many copies of Brown's train split make the large corpus.")
FILE = flags.DEFINE_string("file", None, "Internal: measure this one file and print JSON.")


def measure(path: str) -> dict:
    from nplm_tf.core.config import Config
    from nplm_tf.training import data
    from pipelines import corpus as corpus_lib
    from pipelines import vocabulary

    config = Config()
    split = corpus_lib.file_split(path)
    start = time.perf_counter()
    vocab = vocabulary.build(split, config.min_count, config.max_vocab)
    _, tokens, lines = vocabulary.count_split(split)
    prepare = time.perf_counter() - start
    ds = data.window_dataset(
        split, vocab, config.order, 256, tokens + lines, shuffle=True, shuffle_buffer=config.shuffle_buffer, seed=1
    )
    start = time.perf_counter()
    seen = 0
    for _, target in ds:
        seen += int(target.shape[0])
    seconds = time.perf_counter() - start
    return {
        "tokens": seen,
        "tokens_per_second": round(seen / seconds),
        "vocabulary_and_count_seconds": round(prepare, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def check() -> None:
    from pipelines.errors import UserError

    if REPEAT.value < 1:
        raise UserError(f"repeat={REPEAT.value} must be at least 1.")
    if FILE.value and not os.path.isfile(FILE.value):
        raise UserError(f"{FILE.value} is not a file.")


def main(argv, checked):
    if FILE.value:
        print(json.dumps(measure(FILE.value)))
        return
    from pipelines import corpus as corpus_lib

    lines = corpus_lib.brown_corpus()["train"].lines
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, copies in (("brown_train", 1), (f"brown_train_x{REPEAT.value}", REPEAT.value)):
            path = os.path.join(tmp, f"{name}.txt")
            with open(path, "w", encoding="utf-8") as f:
                for _ in range(copies):
                    f.writelines(line + "\n" for line in lines)
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.pipeline", f"--file={path}"],
                capture_output=True,
                text=True,
                check=True,
            )
            results[name] = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps(results))


if __name__ == "__main__":
    app.run(main, check)
