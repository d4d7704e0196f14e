"""Training throughput for MLP9 at batch 256, as benchmarks/README.md defines it.

    NLTK_DATA=../shared/nltk_data python -m benchmarks.throughput [--precision=float32]
    python -m benchmarks.throughput --corpus=gcide --shortlist=4000     # or --loss=nce --num_sampled=100
    python -m benchmarks.throughput --classes=-1 --beside_softmax       # a head and the full softmax, alternated

Prints one JSON line: predicted tokens/s after warm-up (steady state: from the
end of each fit's first 32-step call to its last; the rate including each
fit's iterator start is printed beside it), the model FLOP rate
6·(h·|V| + (n−1)·m·h [+ (n−1)·m·|V|])·tokens/s, a dense float32 2048×2048
matmul's rate timed in this process right after each repeat, and the median
of the per-repeat ratios (medians of each part beside it), and per repeat the
share of CPU time the host's hypervisor took (`cpu_steal_runs`, `benchmarks.host`). --beside_softmax
times the full softmax of the same shape after each repeat too (`softmax_tokens_per_second_runs`), and each
repeat's speed over it (`over_softmax_runs`): the two alternate, so the host's drift touches both alike.
"""

import dataclasses
import json
import time

from absl import flags

from benchmarks import host
from nplm_tf.core.config import Config
from pipelines import app, corpus_flags

PRECISION = flags.DEFINE_enum("precision", "mixed_bfloat16", ["float32", "mixed_bfloat16"], "Compute dtype.")
OPTIMIZER = flags.DEFINE_enum("optimizer", "adam", ["sgd", "adam"], "Optimizer.")
DIRECT = flags.DEFINE_boolean("direct", False, "Direct connections W.")
ORDER = flags.DEFINE_integer("order", Config.order, "n: the model sees the n-1 previous words.")
FEATURE_DIM = flags.DEFINE_integer("feature_dim", Config.feature_dim, "m: features per word.")
HIDDEN_DIM = flags.DEFINE_integer("hidden_dim", Config.hidden_dim, "h: tanh hidden units.")
JIT = flags.DEFINE_boolean("jit_compile", False, "XLA-compile the whole training step.")
WARMUP = flags.DEFINE_integer("warmup_steps", 128, "Steps before timing.")
STEPS = flags.DEFINE_integer("steps", 1024, "Timed steps.")
REPEATS = flags.DEFINE_integer("repeats", 5, "Timed repeats; the median is reported.")
SHORTLIST = flags.DEFINE_integer("shortlist", 0, "N > 0: a short list of the N most frequent words.")
TAIL = flags.DEFINE_enum("tail", "class", ["class", "backoff", "sigmoid", "network"], "The short list's tail.")
LOSS = flags.DEFINE_enum("loss", "softmax", ["softmax", "sampled_softmax", "nce"], "Training loss.")
NUM_SAMPLED = flags.DEFINE_integer("num_sampled", 100, "Noise words per batch for sampled losses.")
MIN_COUNT = flags.DEFINE_integer("min_count", 4, "Words seen fewer times in train become <unk>.")
CLASSES = flags.DEFINE_integer("classes", 0, "C: the class-factored softmax of C word classes (-1: ⌈√|V|⌉).")
BESIDE_SOFTMAX = flags.DEFINE_boolean(
    "beside_softmax", False, "Also time the full softmax of the same shape, each repeat right after this one's."
)


def matmul_gflops(repeats: int = 20) -> float:
    import tensorflow as tf

    a = tf.random.normal([2048, 2048])
    f = tf.function(lambda a: tf.matmul(a, a))
    f(a).numpy()
    start = time.perf_counter()
    for _ in range(repeats):
        r = f(a)
    r.numpy()
    return 2 * 2048**3 * repeats / (time.perf_counter() - start) / 1e9


def steady_clock():
    """A Keras callback giving steps per second from the first reported batch to the last.

    Each `fit` builds a new iterator, whose start (filling the shuffle
    buffer) is not training; the clock starts after the first call of the
    training function (32 steps) has returned, so only steady-state steps count.
    """
    import keras

    class SteadyClock(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.marks = []

        def on_train_batch_end(self, batch, logs=None):
            self.marks.append((batch, time.perf_counter()))

        def steps_per_second(self):
            (first, t0), (last, t1) = self.marks[0], self.marks[-1]
            return (last - first) / (t1 - t0)

    return SteadyClock()


def check():
    """The configuration the flags make, the corpus and its data (`prepare_data`: the splits checked, the
    vocabulary built and the settings that depend on |V| checked), all before TensorFlow loads."""
    from nplm_tf.core.config import STEPS_PER_EXECUTION, Config, ConfigError
    from nplm_tf.training.data import prepare_data

    if STEPS.value <= STEPS_PER_EXECUTION:  # the clock needs two calls of the training function
        raise ConfigError(f"steps={STEPS.value} must be more than {STEPS_PER_EXECUTION}.")
    if WARMUP.value < 1 or REPEATS.value < 1:
        raise ConfigError(f"warmup_steps={WARMUP.value} and repeats={REPEATS.value} must be at least 1.")
    config = Config(
        precision=PRECISION.value,
        optimizer=OPTIMIZER.value,
        direct=DIRECT.value,
        order=ORDER.value,
        feature_dim=FEATURE_DIM.value,
        hidden_dim=HIDDEN_DIM.value,
        batch_size=256,
        jit_compile=JIT.value,
        min_count=MIN_COUNT.value,
        shortlist=SHORTLIST.value,
        tail=TAIL.value if SHORTLIST.value else "class",
        loss=LOSS.value,
        num_sampled=NUM_SAMPLED.value,
        classes=CLASSES.value,
    )
    corpus = corpus_flags.corpus_from_flags()
    return config, corpus, prepare_data(config, corpus)


def main(argv, checked):
    import statistics

    import keras

    from nplm_tf.network import heads, objectives
    from nplm_tf.network import model as model_lib
    from nplm_tf.training import trainer

    config, corpus, data = checked
    ds = data.dataset(corpus, "train", config, batch_size=config.batch_size, shuffle=True, seed=1).repeat()

    def compiled(config):
        head = heads.make(config, data.vocab.size)
        model = model_lib.build_model(config, head)
        objective = objectives.of_config(config, head, data.vocab.counts)
        model_lib.compile_model(model, config, steps_per_execution=trainer.STEPS_PER_EXECUTION, objective=objective)
        model.fit(ds, steps_per_epoch=WARMUP.value, epochs=1, verbose=0)
        return model

    def timed(model) -> float:
        clock = steady_clock()
        model.fit(ds, steps_per_epoch=STEPS.value, epochs=1, verbose=0, callbacks=[clock])
        return clock.steps_per_second() * config.batch_size

    model = compiled(config)
    softmax = None
    if BESIDE_SOFTMAX.value:
        plain = dataclasses.replace(config, shortlist=0, tail="class", loss="softmax", classes=0)
        softmax = compiled(plain)
    softmax_rates = []
    n1m, h, v = config.context_size * config.feature_dim, config.hidden_dim, data.vocab.size
    # The output layer's width per token: |V|, a short list's N (+ 1) (the network tail's: N + 1, and its tail
    # words for the train tokens in the tail), or a sampled loss's targets and noise.
    width = model.head.trained_width(data.vocab.counts) if config.loss == "softmax" else config.num_sampled + 1
    flops_per_token = 6 * (h * width + n1m * h + (n1m * width if config.direct else 0))
    rates, wall_rates, denses, ratios, steals = [], [], [], [], []
    for _ in range(REPEATS.value):
        clock = steady_clock()
        start, cpu = time.perf_counter(), host.cpu_times()
        model.fit(ds, steps_per_epoch=STEPS.value, epochs=1, verbose=0, callbacks=[clock])
        wall_rates.append(STEPS.value * config.batch_size / (time.perf_counter() - start))
        steal = host.steal_share(cpu, host.cpu_times())
        steals.append(None if steal is None else round(steal, 3))
        rates.append(clock.steps_per_second() * config.batch_size)
        # The matmul right after each repeat: this host's speed drifts, so each ratio compares like with like.
        denses.append(matmul_gflops())
        ratios.append(flops_per_token * rates[-1] / 1e9 / denses[-1])
        if softmax is not None:
            softmax_rates.append(timed(softmax))
    tokens_per_second = statistics.median(rates)
    model_gflops = flops_per_token * tokens_per_second / 1e9
    dense = statistics.median(denses)
    keras.backend.clear_session()
    print(
        json.dumps(
            {
                "config": {
                    "order": config.order,
                    "feature_dim": config.feature_dim,
                    "hidden_dim": h,
                    "direct": config.direct,
                    "vocab_size": v,
                    "batch_size": config.batch_size,
                    "precision": config.precision,
                    "optimizer": config.optimizer,
                    "jit_compile": config.jit_compile,
                    "corpus": corpus.name,
                    "shortlist": config.shortlist,
                    "tail": config.tail,
                    "loss": config.loss,
                    "num_sampled": config.num_sampled if config.loss != "softmax" else None,
                    "classes": config.classes,
                },
                "tokens_per_second": round(tokens_per_second),
                "tokens_per_second_runs": [round(r) for r in rates],
                "tokens_per_second_with_iterator_start": [round(r) for r in wall_rates],
                "model_gflops": round(model_gflops, 1),
                "dense_matmul_fp32_gflops": round(dense, 1),
                "dense_matmul_fp32_gflops_runs": [round(d, 1) for d in denses],
                "ratio": round(statistics.median(ratios), 3),
                "ratio_runs": [round(r, 3) for r in ratios],
                "cpu_steal_runs": steals,
            }
            | (
                {
                    "softmax_tokens_per_second_runs": [round(r) for r in softmax_rates],
                    "over_softmax_runs": [round(a / b, 3) for a, b in zip(rates, softmax_rates, strict=True)],
                }
                if softmax is not None
                else {}
            )
        )
    )


if __name__ == "__main__":
    app.run(main, check)
