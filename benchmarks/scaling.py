"""Multi-worker scaling on one machine: 1 worker on 1 core against N workers on N cores.

    NLTK_DATA=../shared/nltk_data python -m benchmarks.scaling --workers=2

Launches each configuration as real MultiWorkerMirroredStrategy worker
processes on 127.0.0.1 (TF_CONFIG), each pinned to its own core with one
TensorFlow thread pool thread, training the Brown MLP9 configuration (the
defaults) with the same custom loop as `nplm_tf.train --strategy=multi_worker`
at the same global batch. After warm-up, the chief times `--steps` steps and
prints predicted tokens per second; the script prints one JSON line with the
1-worker rate, the N-worker rate and their ratio.
"""

import json
import os
import subprocess
import sys

from absl import app, flags

from nplm_tf import cli

WORKERS = flags.DEFINE_integer("workers", 2, "Workers (one core each) to compare with one.")
STEPS = flags.DEFINE_integer("steps", 160, "Timed training steps (global batches).")
BATCH = flags.DEFINE_integer("batch_size", 256, "Global batch size.")
ONE = flags.DEFINE_boolean("one", True, "Also time the 1-worker baseline.")
INTEROP = flags.DEFINE_integer("interop_threads", 1, "TensorFlow inter-op threads per worker.")
ROLE = flags.DEFINE_boolean("worker", False, "Internal: run as one worker (TF_CONFIG set by the launcher).")


def worker_main():
    import time

    import tensorflow as tf

    from nplm_tf import multi_worker_lib, train_lib
    from nplm_tf.config import Config
    from pipelines import corpus as corpus_lib

    strategy = cli.make_strategy("multi_worker")
    config = Config(batch_size=BATCH.value)
    corpus = corpus_lib.brown_corpus()
    data = train_lib.prepare_data(config, corpus)
    model, optimizer = multi_worker_lib.build(config, data.vocab.size, strategy)
    train_steps = multi_worker_lib.make_train_steps(model, optimizer, strategy, config)
    per_call = 16
    iterator = multi_worker_lib.distributed_train_dataset(config, data, corpus, 0, STEPS.value + 4 * per_call, strategy)
    for _ in range(4):  # warm-up: tracing, thread pools, input pipeline
        train_steps(iterator, tf.constant(per_call))
    start = time.perf_counter()
    for _ in range(STEPS.value // per_call):
        train_steps(iterator, tf.constant(per_call))
    seconds = time.perf_counter() - start
    if multi_worker_lib.is_chief(strategy):
        tokens = (STEPS.value // per_call) * per_call * BATCH.value
        print(json.dumps({"tokens_per_second": tokens / seconds, "seconds": seconds}), flush=True)


def launch(workers: int) -> float:
    cluster = [f"127.0.0.1:{p}" for p in cli.loopback_ports(workers)]
    procs = []
    for index in range(workers):
        env = dict(os.environ, TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS=str(INTEROP.value),
                   TF_CONFIG=json.dumps({"cluster": {"worker": cluster}, "task": {"type": "worker", "index": index}}))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "benchmarks.scaling", "--worker", f"--steps={STEPS.value}",
             f"--batch_size={BATCH.value}"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda core=index: os.sched_setaffinity(0, {core % os.cpu_count()})))
    outputs = [p.communicate(timeout=1800) for p in procs]
    for p, (_, err) in zip(procs, outputs):
        if p.returncode != 0:
            raise RuntimeError(f"a worker failed:\n{err[-3000:]}")
    return json.loads(outputs[0][0].strip().splitlines()[-1])["tokens_per_second"]


def main(argv):
    if ROLE.value:
        worker_main()
        return
    one = launch(1) if ONE.value else float("nan")
    many = launch(WORKERS.value)
    print(json.dumps({"batch_size": BATCH.value, "steps": STEPS.value, "one_worker_tokens_per_second": round(one, 1),
                      f"{WORKERS.value}_workers_tokens_per_second": round(many, 1), "speedup": round(many / one, 3)}))


if __name__ == "__main__":
    app.run(main)
