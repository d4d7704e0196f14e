"""Training speed against the USC nplm toolkit at the paper's MLP9 shape, the two alternated in one run.

    NLTK_DATA=../shared/nltk_data python -m benchmarks.nplm_toolkit --nplm_bin=DIR [--rounds=3]

DIR holds the toolkit's `prepareNeuralLM` and `trainNeuralNetwork` (github.com/moses-smt/nplm, built with its
own Makefile; this script builds nothing). Both train on Brown's train split with this project's vocabulary
(`--min_count=4`: nplm reads it, with its `<s>`, as its words file) at n = 5, m = 30, h = 100 tanh units and the full softmax
over |V|, minibatch 256: nplm's `--num_hidden=0 --output_embedding_dimension=100
--input_embedding_dimension=30 --activation_function=tanh --loss_function=log`, on every CPU
(`--num_threads`). Each round times nplm's one epoch over the first `--ngrams` and the first 2·`--ngrams`
training n-grams and reports the difference's rate (its start-up and the file reading cancel), then runs
`benchmarks.throughput` at the precision `train` would choose here (`--precision=auto`'s rule, or
`--precision`) with `train`'s default optimizer, Adam, or with `--optimizer=sgd`, the plain SGD nplm runs.
Prints one JSON line: both rates per round and their ratios.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

from absl import flags

from benchmarks import host
from pipelines import app, corpus_flags
from pipelines.errors import UserError

NPLM_BIN = app.define_path(
    "nplm_bin", None, "The folder of nplm's prepareNeuralLM and trainNeuralNetwork.", required=True
)
ROUNDS = flags.DEFINE_integer("rounds", 3, "Alternated rounds.", lower_bound=1)
NGRAMS = flags.DEFINE_integer(
    "ngrams", 100_000, "nplm's rate: N over the time of 2N n-grams less that of N.", lower_bound=1000
)
STEPS = flags.DEFINE_integer("steps", 512, "benchmarks.throughput's timed steps per repeat.", lower_bound=64)
PRECISION = flags.DEFINE_enum(
    "precision", "auto", ["auto", "float32", "mixed_bfloat16"], "This project's precision (auto: train's choice)."
)
OPTIMIZER = flags.DEFINE_enum(
    "optimizer", "adam", ["adam", "sgd"], "This project's optimizer: train's default, or the SGD nplm trains with."
)
ORDER, FEATURES, HIDDEN, BATCH = 5, 30, 100, 256


def settings():
    for tool in ("prepareNeuralLM", "trainNeuralNetwork"):
        path = os.path.join(NPLM_BIN.value, tool)
        if not os.access(path, os.X_OK):
            raise UserError(f"--nplm_bin={NPLM_BIN.value} has no executable {tool}; build nplm's src/ with make.")
    return corpus_flags.corpus_from_flags()


def run(command: list[str]) -> float:
    """Wall seconds of the nplm tool `command` (its flags written `--name=value`, passed as TCLAP reads them)."""
    command = [command[0], *(part for arg in command[1:] for part in arg.split("=", 1))]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise UserError(f"{os.path.basename(command[0])} failed: {done.stderr.strip()[-500:]}")
    return time.perf_counter() - start


def prepare(corpus, folder: str) -> tuple[str, int]:
    """nplm's numberized training n-grams of the train split, over this project's vocabulary."""
    from pipelines import vocabulary as vocab_lib

    vocab = vocab_lib.build(corpus["train"], min_count=4)
    words = os.path.join(folder, "words")
    with open(words, "w", encoding="utf-8") as f:
        f.write("".join(w + "\n" for w in (*vocab.words, "<s>")))  # nplm's input padding is one of its words
    text = os.path.join(folder, "train.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in corpus["train"].iter_lines()))  # nplm adds <s> and </s>
    ngrams = os.path.join(folder, "train.ngrams")
    run(
        [
            os.path.join(NPLM_BIN.value, "prepareNeuralLM"),
            f"--train_text={text}",
            f"--ngram_size={ORDER}",
            f"--words_file={words}",
            f"--vocab_size={vocab.size + 1}",
            f"--train_file={ngrams}",
            "--validation_size=0",
        ]
    )
    with open(ngrams, encoding="ascii") as f:
        rows = f.readlines()
    for count in (NGRAMS.value, 2 * NGRAMS.value):
        with open(f"{ngrams}.{count}", "w", encoding="ascii") as f:
            f.writelines(rows[:count])
    return ngrams, len(rows)


def nplm_epoch(ngrams: str, count: int, folder: str, size: int) -> float:
    return run(
        [
            os.path.join(NPLM_BIN.value, "trainNeuralNetwork"),
            f"--train_file={ngrams}.{count}",
            f"--ngram_size={ORDER}",
            f"--vocab_size={size}",
            f"--words_file={os.path.join(folder, 'words')}",
            "--num_epochs=1",
            f"--minibatch_size={BATCH}",
            "--num_hidden=0",
            f"--input_embedding_dimension={FEATURES}",
            f"--output_embedding_dimension={HIDDEN}",
            "--activation_function=tanh",
            "--loss_function=log",
            "--learning_rate=0.01",
            f"--num_threads={os.cpu_count()}",
            f"--model_prefix={os.path.join(folder, 'model')}",
        ]
    )


def vocab_size(folder: str) -> int:
    with open(os.path.join(folder, "words"), encoding="utf-8") as f:
        return sum(1 for _ in f)


def project_rate(precision: str) -> dict:
    command = [
        sys.executable,
        "-m",
        "benchmarks.throughput",
        f"--precision={precision}",
        f"--optimizer={OPTIMIZER.value}",
        "--repeats=1",
        f"--steps={STEPS.value}",
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise UserError(f"benchmarks.throughput failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv, corpus):
    from nplm_tf.core import hardware

    precision = PRECISION.value if PRECISION.value != "auto" else hardware.fast_precision()[0]
    rounds = []
    with tempfile.TemporaryDirectory(prefix="nplm_toolkit_") as folder:
        ngrams, total = prepare(corpus, folder)
        size = vocab_size(folder)
        if total < 2 * NGRAMS.value:
            raise UserError(f"--ngrams={NGRAMS.value} is more than half the {total:,} training n-grams.")
        for _ in range(ROUNDS.value):
            before = host.cpu_times()
            short = nplm_epoch(ngrams, NGRAMS.value, folder, size)
            long = nplm_epoch(ngrams, 2 * NGRAMS.value, folder, size)
            nplm = NGRAMS.value / max(long - short, 1e-9)
            ours = project_rate(precision)["tokens_per_second"]
            rounds.append(
                {
                    "nplm_tokens_per_second": round(nplm),
                    "nplm_tf_tokens_per_second": ours,
                    "ratio": round(ours / nplm, 3),
                    "cpu_steal": host.steal_share(before, host.cpu_times()),
                }
            )
            print(json.dumps(rounds[-1]), file=sys.stderr, flush=True)
    ratios = sorted(r["ratio"] for r in rounds)
    print(
        json.dumps(
            {
                "shape": {"n": ORDER, "m": FEATURES, "h": HIDDEN, "batch": BATCH, "vocab": size},
                "precision": precision,
                "optimizer": OPTIMIZER.value,
                "threads": os.cpu_count(),
                "rounds": rounds,
                "ratio_median": ratios[len(ratios) // 2],
                "ratio_range": [ratios[0], ratios[-1]],
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    app.run(main, settings)
