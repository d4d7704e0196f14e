"""Reading an ARPA file: n-grams per second, peak memory, and equality with the model that wrote it.

    python -m nplm_tf.ngram --corpus=gcide --order=5 --output=runs/gcide_kn5     # writes model.arpa too
    python -m benchmarks.arpa_import --ngram_dir=runs/gcide_kn5 --corpus=gcide [--rounds=3]

Each round reads DIR/model.arpa (`arpa.read_arpa` over DIR's vocabulary) in a fresh process, timed by its
wall clock around the read and by its peak RSS (`getrusage` of the child: Python, numpy and the vocabulary
included). Then the model read back is compared with DIR's own on the corpus's test split: the largest
difference of per-token ln P. Prints one JSON object. Targets (issue 75): at least 300,000 n-grams a second,
peak RSS at most 2.5 times the file's size, per-token ln P equal to 1e-9.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from absl import flags

from pipelines import app, corpus_flags
from pipelines.errors import UserError

NGRAM_DIR = app.define_path("ngram_dir", None, "A directory written by nplm_tf.ngram (with model.arpa).", required=True)
ROUNDS = flags.DEFINE_integer("rounds", 3, "Reads, each in a fresh process.")
WORKER = app.define_path("worker", None, "Internal: read the file and save the model to this directory.")


def check():
    from nplm_tf.core.run_dir import RunDir

    if ROUNDS.value < 1:
        raise UserError(f"rounds={ROUNDS.value} must be at least 1.")
    if not os.path.isfile(RunDir(NGRAM_DIR.value).arpa):
        raise UserError(f"{NGRAM_DIR.value} has no model.arpa; build it with nplm_tf.ngram (--arpa is the default).")
    return None if WORKER.value else corpus_flags.corpus_from_flags()


def read_once(run, output: str) -> None:
    """The worker: reads the file, prints its seconds, saves the model."""
    from nplm_tf.baselines import arpa, build

    vocab = run.load_vocab()
    start = time.perf_counter()
    model, _ = arpa.read_arpa(run.arpa, vocab)
    seconds = time.perf_counter() - start
    build.save(model, output)
    print(json.dumps({"seconds": seconds, "ngrams": sum(model.orders[k].keys.size for k in range(1, model.order + 1))}))


def main(argv, corpus):
    import numpy as np

    from nplm_tf.baselines import build
    from nplm_tf.core.run_dir import RunDir

    run = RunDir(NGRAM_DIR.value)
    if WORKER.value:
        read_once(run, WORKER.value)
        return
    size = os.path.getsize(run.arpa)
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(ROUNDS.value):
            child = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.arpa_import", f"--ngram_dir={run.path}", f"--worker={tmp}"],
                stdout=subprocess.PIPE,
                text=True,
            )
            out = child.stdout.read()
            _, status, usage = os.wait4(child.pid, 0)
            if status != 0:
                raise RuntimeError(f"the read exited with {status}")
            read = json.loads(out.strip().splitlines()[-1])
            rss = usage.ru_maxrss * 1024
            rounds.append({**read, "ngrams_per_second": read["ngrams"] / read["seconds"], "peak_rss_bytes": rss})
            print(
                f"read {read['ngrams']:,} n-grams in {read['seconds']:.1f} s, peak RSS {rss / 2**20:,.0f} MiB",
                file=sys.stderr,
                flush=True,
            )
        imported = build.load(tmp)
    direct = build.load(run.path)
    vocab = run.load_vocab()
    test = build.token_arrays(corpus["test"], vocab)
    difference = np.abs(np.log(imported.token_probabilities(test)) - np.log(direct.token_probabilities(test)))
    print(
        json.dumps(
            {
                "arpa_bytes": size,
                "ngrams": rounds[0]["ngrams"],
                "ngrams_per_second": [round(r["ngrams_per_second"]) for r in rounds],
                "peak_rss_over_file": [round(r["peak_rss_bytes"] / size, 3) for r in rounds],
                "test_tokens": int(difference.size),
                "max_abs_ln_p_difference": float(difference.max()),
            }
        )
    )


if __name__ == "__main__":
    app.run(main, check, tensorflow=False)
