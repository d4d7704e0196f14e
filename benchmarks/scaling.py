"""Multi-worker scaling on one machine: 1 worker on 1 core against N workers on N cores.

    NLTK_DATA=../shared/nltk_data python -m benchmarks.scaling --workers=2 [--sync_every=K [--balance_workers]]

Launches each configuration as real MultiWorkerMirroredStrategy worker
processes on 127.0.0.1 (TF_CONFIG), each pinned to its own core with one
TensorFlow thread pool thread, training the Brown MLP9 configuration (the
defaults) with the same custom loop as `nplm_tf.train --strategy=multi_worker`
at the same global batch. After warm-up, the chief times `--steps` global
batches and prints predicted tokens per second; the script prints one JSON
line with the 1-worker rate, the N-worker rate and their ratio (medians over
`--repeats`; `pair_speedups` are the ratios within each repeat, where one
and N workers ran a minute apart, and their median). With
`--sync_every=K` both configurations run local SGD (`nplm_tf.train
--sync_every=K`): each worker takes K steps on whole batches of its own, then
the weights are averaged; one worker then runs the same loop with no peer,
and `averaging_share` is, per N-worker run, the largest share of a
worker's timed window spent averaging (the all-reduce and the wait for the
slower worker). `--balance_workers` runs local SGD as `nplm_tf.train
--balance_workers` does: shares dealt by worker speed, the average in a
background thread applied one round late; the timed window then starts and
ends when every worker has finished an average, so it holds all the
waiting. `--ceiling` adds a third configuration to each repeat: N
one-worker jobs at once, one per core, with no communication at all; their
summed rate over the 1-worker rate (`independent_speedup`) is what this
machine's cores allow, whatever the distribution code does.
"""

import json
import os
import subprocess
import sys

from absl import flags

from nplm_tf.training import strategies
from pipelines import app

WORKERS = flags.DEFINE_integer("workers", 2, "Workers (one core each) to compare with one.")
STEPS = flags.DEFINE_integer("steps", 160, "Timed training steps (global batches).")
BATCH = flags.DEFINE_integer("batch_size", 256, "Global batch size.")
ONE = flags.DEFINE_boolean("one", True, "Also time the 1-worker baseline.")
SYNC_EVERY = flags.DEFINE_integer(
    "sync_every",
    1,
    "1: all-reduce gradients every step; K > 1: local SGD, "
    "weights averaged every K steps (as `nplm_tf.train --sync_every`).",
)
BALANCE = flags.DEFINE_boolean(
    "balance_workers",
    False,
    "With --sync_every=K > 1: deal each round's batches by "
    "worker speed and average in the background (as `nplm_tf.train --balance_workers`).",
)
INTEROP = flags.DEFINE_integer("interop_threads", 1, "TensorFlow inter-op threads per worker.")
REPEATS = flags.DEFINE_integer("repeats", 3, "Alternating repeats of both configurations; medians are reported.")
CEILING = flags.DEFINE_boolean(
    "ceiling",
    False,
    "Also time N independent one-worker jobs at once, one per core "
    "(no communication): the most N workers could reach on this machine.",
)
ROLE = flags.DEFINE_boolean("worker", False, "Internal: run as one worker (TF_CONFIG set by the launcher).")


def worker_main():
    import time

    import tensorflow as tf

    from nplm_tf.core.config import Config
    from nplm_tf.distributed import local_sgd, multi_worker
    from nplm_tf.network import heads
    from nplm_tf.training.data import prepare_data
    from pipelines import corpus as corpus_lib

    strategy = strategies.make_strategy("multi_worker")
    config = Config(batch_size=BATCH.value, sync_every=SYNC_EVERY.value, balance_workers=BALANCE.value)
    corpus = corpus_lib.brown_corpus()
    data = prepare_data(config, corpus)
    local = config.sync_every > 1
    model, optimizer = multi_worker.build(config, heads.make(config, data.vocab.size), strategy, local=local)
    if local:  # each worker steps through its share of each round's global batches, then the weights are averaged
        workers = strategy.num_replicas_in_sync
        per_call = config.sync_every
        calls = max(1, STEPS.value // (per_call * workers))
        rounds = local_sgd.LocalSGD(model, optimizer, strategy, config)
        iterator = iter(rounds.dataset(config, data, corpus, 0, (calls + 4) * per_call * workers))

        def run_call():
            return rounds.round(iterator, per_call * workers)[1]  # the averaging, with the wait for the slower worker
    else:
        workers, per_call = 1, 16  # a step is a global batch
        calls = STEPS.value // per_call
        train_steps = multi_worker.make_train_steps(model, optimizer, strategy, config)
        iterator = multi_worker.distributed_train_dataset(config, data, corpus, 0, STEPS.value + 4 * per_call, strategy)

        def run_call():
            train_steps(iterator, tf.constant(per_call))
            return 0.0

    available = data.tokens["train"] // config.batch_size
    if (calls + 4) * per_call * workers > available:
        from nplm_tf.core.config import ConfigError

        raise ConfigError(
            f"steps={STEPS.value} with sync_every={config.sync_every} needs "
            f"{(calls + 4) * per_call * workers} batches with the warm-up, more than one epoch "
            f"({available})."
        )
    for _ in range(4):  # warm-up: tracing, thread pools, input pipeline
        run_call()
    if local:
        rounds.finish()  # with --balance_workers: the warm-up's background average, so all workers start together
    start = time.perf_counter()
    averaging = sum(run_call() for _ in range(calls))
    if local:
        rounds.finish()  # ... and end together: the last background average is inside the window
    seconds = time.perf_counter() - start
    tokens = calls * per_call * workers * BATCH.value
    print(
        json.dumps({"tokens_per_second": tokens / seconds, "seconds": seconds, "averaging_seconds": averaging}),
        flush=True,
    )


def launch(workers: int, independent: bool = False) -> tuple[float, float]:
    """Tokens/s of `workers` worker processes on cores 0, 1, ... and the largest averaging share.

    `independent`: each process is a one-worker job of its own (no communication); the rate is their sum.
    """
    addresses = [f"127.0.0.1:{p}" for p in strategies.loopback_ports(workers)]
    procs = []
    for index in range(workers):
        cluster, task = ([addresses[index]], 0) if independent else (addresses, index)
        env = dict(
            os.environ,
            TF_NUM_INTRAOP_THREADS="1",
            TF_NUM_INTEROP_THREADS=str(INTEROP.value),
            TF_CONFIG=json.dumps({"cluster": {"worker": cluster}, "task": {"type": "worker", "index": task}}),
        )
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.scaling",
                    "--worker",
                    f"--steps={STEPS.value}",
                    f"--batch_size={BATCH.value}",
                    f"--sync_every={SYNC_EVERY.value}",
                    f"--balance_workers={BALANCE.value}",
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                preexec_fn=lambda core=index: os.sched_setaffinity(0, {core % os.cpu_count()}),
            )
        )
    outputs = [p.communicate(timeout=1800) for p in procs]
    for p, (_, err) in zip(procs, outputs):
        if p.returncode != 0:
            sentences = [line[len("error: ") :] for line in err.splitlines() if line.startswith("error: ")]
            if sentences:
                from nplm_tf.core.config import ConfigError

                raise ConfigError(sentences[0])  # the worker's own one-sentence error
            raise RuntimeError(f"a worker failed:\n{err[-3000:]}")
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    rate = sum(r["tokens_per_second"] for r in results) if independent else results[0]["tokens_per_second"]
    return rate, max(r["averaging_seconds"] / r["seconds"] for r in results)


def check_flags() -> None:
    """The flag values, checked without TensorFlow (`app.run` calls it first)."""
    from nplm_tf.core.config import Config, ConfigError

    if REPEATS.value < 1 or WORKERS.value < 1 or STEPS.value < 1:
        raise ConfigError(
            f"repeats={REPEATS.value}, workers={WORKERS.value} and steps={STEPS.value} must be at least 1."
        )
    Config(batch_size=BATCH.value, sync_every=SYNC_EVERY.value, balance_workers=BALANCE.value)  # bad values: now


def main(argv, _checked):
    if ROLE.value:
        worker_main()
        return
    import statistics

    ones, manys, shares, ceilings = [], [], [], []
    for _ in range(REPEATS.value):  # alternating, so a slow stretch of the host hits every configuration
        if ONE.value:
            ones.append(launch(1)[0])
        rate, share = launch(WORKERS.value)
        manys.append(rate)
        shares.append(share)
        if CEILING.value:
            ceilings.append(launch(WORKERS.value, independent=True)[0])
    one = statistics.median(ones) if ones else float("nan")
    many = statistics.median(manys)
    print(
        json.dumps(
            {
                "batch_size": BATCH.value,
                "steps": STEPS.value,
                "sync_every": SYNC_EVERY.value,
                "balance_workers": BALANCE.value,
                "one_worker_tokens_per_second": round(one, 1),
                f"{WORKERS.value}_workers_tokens_per_second": round(many, 1),
                "speedup": round(many / one, 3),
                "one_worker_runs": [round(r) for r in ones],
                f"{WORKERS.value}_workers_runs": [round(r) for r in manys],
                **(
                    {
                        "pair_speedups": [round(m / o, 3) for m, o in zip(manys, ones)],
                        "pair_speedup_median": round(statistics.median(m / o for m, o in zip(manys, ones)), 3),
                    }
                    if ones
                    else {}
                ),
                **({"averaging_share": [round(s, 3) for s in shares]} if SYNC_EVERY.value > 1 else {}),
                **(
                    {
                        "independent_speedup": round(statistics.median(ceilings) / one, 3),
                        "independent_runs": [round(r) for r in ceilings],
                    }
                    if ceilings
                    else {}
                ),
            }
        )
    )


if __name__ == "__main__":
    app.run(main, check_flags)
