"""The headline Brown run: default flags, timed, in a fresh directory.

    NLTK_DATA=../shared/nltk_data python -m benchmarks.brown --model_dir=runs/brown_default [--flag=value ...]

Trains exactly as `python -m nplm_tf.train` does (any training flag may be
added) and prints one JSON line: valid and test perplexity, the ratio to
KenLM's modified Kneser-Ney 5-gram on the same protocol (benchmarks/README.md), the
training seconds (epochs only) and the wall-clock seconds of the whole run.
"""

import json
import time

from nplm_tf import train as train_binary  # its flags and config_from_flags
from pipelines import app

KENLM_5GRAM_TEST = 200.02  # the Brown protocol, KenLM modified Kneser-Ney order 5, test split


def main(argv, checked):
    start = time.perf_counter()
    metrics = train_binary.train_from_flags(*checked)  # train's own run: its set-up first, then TensorFlow
    print(
        json.dumps(
            {
                "valid_perplexity": round(metrics["valid_perplexity"], 2),
                "test_perplexity": round(metrics["test_perplexity"], 2),
                "test_ratio_to_kenlm_kn5": round(metrics["test_perplexity"] / KENLM_5GRAM_TEST, 3),
                "best_epoch": metrics["best_epoch"],
                "epochs_run": len(metrics["epochs"]),
                "train_seconds": round(metrics["train_seconds"]),
                "wall_seconds": round(time.perf_counter() - start),
                "tokens_per_second": [round(e["tokens_per_second"]) for e in metrics["epochs"]],
                "config": metrics["config"],
            }
        )
    )


if __name__ == "__main__":
    app.run(main, train_binary.check_flags, tensorflow=False, resumable=True)  # train's own check and run
