"""Time of one optimizer step at MLP9's variable shapes: Keras's Adam against FusedAdam.

    python -m benchmarks.optimizer [--direct] [--steps=100] [--repeats=3]

Prints one JSON line: milliseconds per `apply_gradients` (median of the
repeats) for each optimizer, on variables shaped like U (h × |V|), C
((|V|+1) × m), H, d, b (and W with --direct), with the same random gradients
every step. C's gradient is sparse, as in training: a batch's 256 × (n−1)
context rows, drawn with Zipf-like repeats.
"""

import json
import math
import statistics
import time

from absl import flags

from pipelines import app

DIRECT = flags.DEFINE_boolean("direct", False, "Include the direct connections W ((n-1)m × |V|).")
STEPS = flags.DEFINE_integer("steps", 100, "Timed steps per repeat.")
REPEATS = flags.DEFINE_integer("repeats", 3, "Repeats; the median is reported.")
VOCAB = 14_118  # Brown's |V| under the Brown protocol
BATCH = 256


def time_optimizer(make, shapes, steps, repeats, count):
    """`count`: the rows of C's sparse gradient (shapes[1]), a batch's context words, frequent ones repeated."""
    import keras
    import tensorflow as tf

    variables = [keras.Variable(tf.zeros(s)) for s in shapes]
    grads = [tf.random.stateless_normal(s, seed=[i, 0]) for i, s in enumerate(shapes)]
    rows, width = shapes[1]
    ranks = tf.random.stateless_uniform([count], seed=[9, 0], maxval=1.0) ** 3  # mass at the frequent end
    grads[1] = tf.IndexedSlices(
        tf.random.stateless_normal([count, width], seed=[1, 0]), tf.cast(ranks * rows, tf.int32), tf.constant(shapes[1])
    )
    optimizer = make()

    @tf.function
    def step():
        optimizer.apply_gradients(zip(grads, variables))

    step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        variables[0].numpy()
        times.append((time.perf_counter() - start) / steps * 1000)
    return statistics.median(times), times


def check_flags() -> None:
    from nplm_tf.core.config import ConfigError

    if STEPS.value < 1 or REPEATS.value < 1:
        raise ConfigError(f"steps={STEPS.value} and repeats={REPEATS.value} must be at least 1.")


def main(argv, _checked):
    import keras

    from nplm_tf.core.config import Config
    from nplm_tf.network import optimizers

    config = Config(direct=DIRECT.value)
    n1m, h = config.context_size * config.feature_dim, config.hidden_dim
    shapes = [(h, VOCAB), (VOCAB + 1, config.feature_dim), (n1m, h), (h,), (VOCAB,)]
    if config.direct:
        shapes.append((n1m, VOCAB))
    result = {"shapes": shapes, "floats": sum(math.prod(s) for s in shapes)}
    for name, make in (
        ("keras_adam", lambda: keras.optimizers.Adam(1e-3)),
        ("fused_adam", lambda: optimizers.FusedAdam(1e-3)),
        ("sgd", lambda: keras.optimizers.SGD(1e-3)),
    ):
        median, times = time_optimizer(make, shapes, STEPS.value, REPEATS.value, BATCH * config.context_size)
        result[name + "_ms"] = round(median, 2)
        result[name + "_ms_runs"] = [round(t, 2) for t in times]
    print(json.dumps(result))


if __name__ == "__main__":
    app.run(main, check_flags)
