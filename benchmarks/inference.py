"""The NumPy inference path against TensorFlow's: a one-line `query` from a cold start, `rescore` of n-best
lines, and the two paths' agreement.

    NLTK_DATA=../shared/nltk_data python -m benchmarks.inference --model_dir=runs/mlp9 [--rounds=3]
    NLTK_DATA=../shared/nltk_data python -m benchmarks.inference --model_dir=runs/mlp9 --ngram_dir=runs/kn5

Each round runs, alternated, `echo "the jury said" | query` with the default path (NumPy, float32) and with
`--precision=PRECISION` (TensorFlow, the run's own precision by default), then `rescore` of --nbest_lines
hypotheses (Brown's test sentences, or the model's corpus's) both ways; every run is a fresh process, timed
by its wall clock and its peak RSS (`getrusage` of the child). Then the per-token log10 P of 2,000 test
sentences by both paths in float32, and by NumPy in float64: how far apart the two are, and each from the
float64 computation. Prints one JSON object. Targets (issue 74): query ≤ 1 s
and ≤ 250 MB; rescore no slower than TensorFlow's.

With --ngram_dir, each round also times the mixed query of a model directory that keeps no fit: first with
an empty fit cache (`nplm_tf.tools.fit_cache`: the fit on valid is paid, and said), then again (the fit read
back), and the n-gram queried alone. Target (issue 94): the mixed query ≤ 2 s once the fit is kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from absl import flags

from pipelines import app
from pipelines.errors import UserError

MODEL_DIR = app.define_path("model_dir", None, "A directory written by nplm_tf.train.", required=True)
NGRAM_DIR = app.define_path("ngram_dir", None, "Also time the mixed query with this n-gram, and it alone.")
ROUNDS = flags.DEFINE_integer("rounds", 3, "Alternated rounds of each measurement.")
NBEST_LINES = flags.DEFINE_integer("nbest_lines", 10_000, "Hypotheses rescored per run.")
PRECISION = flags.DEFINE_enum(
    "precision", None, ["float32", "mixed_bfloat16"], "TensorFlow's precision (default: the run's own)."
)


def timed(args: list[str], stdin: str, env: dict | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of `python -m ARGS < STDIN` in a fresh process (`env`: added to ours)."""
    with open(stdin, "rb") as source:
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", *args],
            stdin=source,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(f"{' '.join(args)} exited with {status}")
    return seconds, usage.ru_maxrss / 1024


def check() -> None:
    from nplm_tf.core import run_dir

    if ROUNDS.value < 1 or NBEST_LINES.value < 1:
        raise UserError(f"rounds={ROUNDS.value} and nbest_lines={NBEST_LINES.value} must be at least 1.")
    run_dir.check_trained(MODEL_DIR.value)
    if NGRAM_DIR.value:
        run_dir.check_kind(NGRAM_DIR.value, "ngram_dir", "ngram")


def main(argv, checked):
    import numpy as np

    from nplm_tf.core import run_dir
    from nplm_tf.tools import lines as lines_lib
    from pipelines import corpus_flags

    run = run_dir.RunDir(MODEL_DIR.value)
    precision = PRECISION.value or run.read_config().precision
    test = corpus_flags.corpus_from_flags(run.read_corpus(), MODEL_DIR.value)["test"]
    sentences = [" ".join(s.split()) for text in test.iter_lines() for s in text.split(" . ") if s.split()]
    with tempfile.TemporaryDirectory() as scratch:
        one = os.path.join(scratch, "one.txt")
        with open(one, "w", encoding="utf-8") as f:
            f.write("the jury said\n")
        nbest = os.path.join(scratch, "nbest.txt")
        with open(nbest, "w", encoding="utf-8") as f:
            for i in range(NBEST_LINES.value):
                f.write(f"{i // 10} ||| {sentences[i % len(sentences)]} ||| LM0= -1 ||| -1\n")
        model = f"--model_dir={MODEL_DIR.value}"
        runs = {"query_numpy": [], "query_tensorflow": [], "rescore_numpy": [], "rescore_tensorflow": []}
        for _ in range(ROUNDS.value):
            runs["query_numpy"].append(timed(["nplm_tf.query", model, "--nomixture"], one))
            runs["query_tensorflow"].append(
                timed(["nplm_tf.query", model, "--nomixture", f"--precision={precision}"], one)
            )
            runs["rescore_numpy"].append(timed(["nplm_tf.rescore", model, "--nomixture"], nbest))
            runs["rescore_tensorflow"].append(
                timed(["nplm_tf.rescore", model, "--nomixture", f"--precision={precision}"], nbest)
            )
            if NGRAM_DIR.value:
                ngram = f"--ngram_dir={NGRAM_DIR.value}"
                cache = {"NPLM_TF_CACHE": tempfile.mkdtemp(dir=scratch)}  # empty: this round pays the fit
                for name in ("query_mixture_fit", "query_mixture_kept"):
                    runs.setdefault(name, []).append(timed(["nplm_tf.query", model, ngram], one, cache))
                runs.setdefault("query_ngram_alone", []).append(timed(["nplm_tf.query", ngram], one))
    sample = sentences[:2000]
    numpy_scorer = lines_lib.LineScorer(MODEL_DIR.value)
    ours = np.concatenate([s.log10 for s in numpy_scorer.score(sample)])
    theirs = np.concatenate([s.log10 for s in lines_lib.LineScorer(MODEL_DIR.value, precision="float32").score(sample)])
    network = numpy_scorer._numpy  # the same weights in float64: how far float32 itself is from exact
    for name in ("C", "H", "d", "U", "b", "W"):
        if getattr(network, name) is not None:
            setattr(network, name, getattr(network, name).astype(np.float64))
    exact = np.concatenate([s.log10 for s in numpy_scorer.score(sample)])

    def spread(values):
        values = np.abs(values)
        return {
            "max": float(values.max()),
            "p99.9": float(np.percentile(values, 99.9)),
            "median": float(np.median(values)),
        }

    result = {
        "model_dir": MODEL_DIR.value,
        "tensorflow_precision": precision,
        "nbest_lines": NBEST_LINES.value,
        **{
            name: {"seconds": [round(s, 3) for s, _ in values], "peak_rss_mb": [round(m) for _, m in values]}
            for name, values in runs.items()
        },
        "rescore_seconds_ratio_numpy_to_tensorflow": [
            round(a[0] / b[0], 3) for a, b in zip(runs["rescore_numpy"], runs["rescore_tensorflow"])
        ],
        "abs_log10_difference": {
            "numpy_float32_vs_tensorflow_float32": spread(ours - theirs),
            "numpy_float32_vs_float64": spread(ours - exact),
            "tensorflow_float32_vs_float64": spread(theirs - exact),
        },
        "tokens_compared": int(ours.size),
    }
    print(json.dumps(result, indent=2))


def run():
    app.run(main, check, tensorflow=False)


if __name__ == "__main__":
    run()
