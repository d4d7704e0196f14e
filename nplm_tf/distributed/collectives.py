"""The collectives the multi-worker loops share: packed all-reduces of variables, sums, a barrier."""

from __future__ import annotations

import tensorflow as tf


def worker_index(strategy: tf.distribute.Strategy) -> int:
    """This worker's replica id among all workers (one replica each): its share of the batches."""
    ids = strategy.run(lambda: tf.constant(tf.distribute.get_replica_context().replica_id_in_sync_group))
    return int(strategy.experimental_local_results(ids)[0])


# The weights in packs of up to 4 MiB, all-reduced concurrently: faster than one tensor each, the same means
# (benchmarks.scaling).
_AVERAGE_OPTIONS = tf.distribute.experimental.CommunicationOptions(bytes_per_pack=4 << 20)


def _all_reduce(strategy: tf.distribute.Strategy, op: tf.distribute.ReduceOp, values_fn) -> list:
    """This worker's result of one packed all-reduce of the tensors `values_fn(replica id)` makes (in a tf.function)."""

    def replica_fn():
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        with tf.device(strategy.extended.worker_devices[0]):  # all_reduce sends to the values' device
            values = values_fn(replica)
        return tf.distribute.get_replica_context().all_reduce(op, values, options=_AVERAGE_OPTIONS)

    return strategy.experimental_local_results(strategy.run(replica_fn))[0]


def make_average(variables: list, strategy: tf.distribute.Strategy):
    """A tf.function that sets each of this worker's `variables` to its mean over all workers (one all-reduce)."""

    @tf.function
    def average():
        means = _all_reduce(strategy, tf.distribute.ReduceOp.MEAN, lambda _: [tf.identity(v) for v in variables])
        for variable, mean in zip(variables, means):
            variable.assign(mean)

    return average


def make_weighted_sum(sources: list, targets: list, strategy: tf.distribute.Strategy):
    """A tf.function (weight, rate): each of `targets` set to Σ weight·source over the workers (the weights sum to
    1, so a weighted mean); returns every worker's `rate` as a vector by replica id, from the same all-reduce."""
    workers = strategy.num_replicas_in_sync

    @tf.function
    def weighted_sum(weight, rate):
        sums = _all_reduce(
            strategy,
            tf.distribute.ReduceOp.SUM,
            lambda replica: (
                [tf.identity(v) * tf.cast(weight, v.dtype) for v in sources]
                + [tf.one_hot(replica, workers) * tf.cast(rate, tf.float32)]
            ),
        )  # float32: packed with the values
        for target, value in zip(targets, sums[:-1]):
            target.assign(value)
        return sums[-1]

    return weighted_sum


def all_reduce_sum(strategy: tf.distribute.Strategy, value: float) -> float:
    with tf.device(strategy.extended.worker_devices[0]):
        total = tf.constant(value, tf.float64)
    return float(strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.identity(total)), axis=None))


def barrier(strategy: tf.distribute.Strategy) -> None:
    """An all-reduce every worker must reach: what one wrote before it, the others can read after."""
    strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)
