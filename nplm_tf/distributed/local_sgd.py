"""Local SGD (`config.sync_every` = K > 1): each worker trains its own copy, the copies averaged every K steps.

Each worker trains its own copy of the model on every W-th global batch
(whole `batch_size` batches, W workers) and every K of its steps the copies'
weights are averaged (local SGD, or periodic model averaging: 1/K of the
communication, a different trajectory from synchronous SGD). At the end of
each epoch the weights and the optimizer's moments are averaged, so every
worker holds the same state and the checkpoint is the whole job's.

With `config.balance_workers` as well, no worker waits for another: each
round's W·K batches are dealt as contiguous shares in proportion to the
workers' measured speeds (a faster core takes more), and each round's average,
weighted by the shares, runs in a background thread while the next round
trains and is applied one round late (see `LocalSGD`). Every batch of the
epoch is still trained on exactly once and the epoch still ends with every
worker in the same state, but the dealing depends on measured speeds, so such
runs are not reproducible exactly (each epoch's dealing is recorded in
history.json).
"""

from __future__ import annotations

import threading
import time

import keras
import tensorflow as tf

from nplm_tf.core.config import Config, ConfigError
from nplm_tf.distributed import collectives
from nplm_tf.network import objectives
from nplm_tf.network import step as step_lib
from nplm_tf.training.data import Data
from pipelines import corpus as corpus_lib


def check_local_sgd(strategy: tf.distribute.Strategy) -> None:
    if len(strategy.extended.worker_devices) != 1:
        raise ConfigError(
            f"sync_every > 1 trains one model per worker process, but this worker has "
            f"{len(strategy.extended.worker_devices)} devices; use sync_every=1."
        )


def local_train_dataset(
    config: Config, data: Data, corpus: corpus_lib.Corpus, epoch: int, steps: int, workers: int, index: int
) -> tf.data.Dataset:
    """Every `workers`-th whole global batch from `index`: the same windows as one process, dealt out."""
    return data.train_dataset(corpus, config, epoch).take(steps).shard(workers, index)


def make_local_train_steps(model, optimizer, worker: int = 0):
    """A tf.function that passes over `skip` batches of a plain iterator, then runs `count` steps of this worker's
    own model on the next ones (`worker`: its index, which keys a sampled objective's noise); returns the summed
    loss (`step.summed_loss`)."""

    objective = model.objective or objectives.HeadObjective(model.head)

    @tf.function
    def train_steps(iterator, count, skip):
        for _ in tf.range(skip):
            next(iterator)  # another worker's batch
        total = tf.constant(0.0)
        for _ in tf.range(count):
            context, target = next(iterator)
            nll, regularization = step_lib.train_step(
                model, optimizer, objective, context, target, 1, optimizer.iterations, worker
            )
            total += step_lib.summed_loss(nll, regularization)
        return total

    return train_steps


def _float_variables(optimizer) -> list:
    return [v for v in optimizer.variables if keras.backend.is_float_dtype(v.dtype)]  # moments (and a fixed rate)


def deal(total: int, rates: list[float] | None, workers: int) -> list[int]:
    """`total` batches split among `workers` in proportion to `rates` (equal shares when None or not all positive).

    Every worker gets at least one batch when `total` >= `workers`; the shares sum to `total`; leftovers go by
    largest remainder, ties to the lower index, so every worker computes the same dealing from the same rates.
    """
    if not rates or len(rates) != workers or not all(r > 0 for r in rates):
        rates = [1.0] * workers
    quotas = [total * r / sum(rates) for r in rates]
    counts = [int(q) for q in quotas]
    if total >= workers:
        counts = [max(1, c) for c in counts]
    while sum(counts) > total:  # only after raising a share to 1: take from the largest
        counts[max(range(workers), key=lambda i: (counts[i], -i))] -= 1
    for i in sorted(range(workers), key=lambda i: (counts[i] - quotas[i], i))[: total - sum(counts)]:
        counts[i] += 1
    return counts


class LocalSGD:
    """One worker's side of local SGD (`config.sync_every` = K > 1): rounds of its own steps, each ended by an average.

    A round covers the next W·K global batches of the epoch's shuffled stream (fewer in the epoch's last). The
    epoch's last round averages the weights and the optimizer's moments, synchronously: every worker ends an
    epoch in the same state.

    Without `config.balance_workers`, worker i takes batches i, i+W, ... and each round ends with a plain mean of
    the weights: every run deals the same way and is reproducible, but every round waits for the slowest worker.

    With it, nobody waits:
    - the round's batches are dealt as contiguous shares in proportion to each worker's speed (its batches per
      second of its own steps, as the workers last exchanged them), so a faster core takes more;
    - the average runs in a background thread while the next round trains: at the end of round r the worker
      snapshots its weights s and starts the all-reduce of the shares' weighted mean m (weights: each worker's
      share of the round's batches); at the end of round r+1 it takes m and sets w ← w + m − s, keeping the
      steps it took meanwhile (averaging one round late).
    """

    def __init__(self, model, optimizer, strategy: tf.distribute.Strategy, config: Config):
        check_local_sgd(strategy)
        self.workers = strategy.num_replicas_in_sync
        self.index = collectives.worker_index(strategy)
        self.balance = config.balance_workers
        self._train = make_local_train_steps(model, optimizer, self.index)  # each worker's noise apart
        weights = model.trainable_variables
        every = weights + _float_variables(optimizer)
        if self.balance:
            self._snapshot = [tf.Variable(v, trainable=False) for v in weights]
            self._mean = [tf.Variable(v, trainable=False) for v in weights]
            self._background = collectives.make_weighted_sum(self._snapshot, self._mean, strategy)
            self._average_all = collectives.make_weighted_sum(every, every, strategy)
            self._snap = _make_assign(self._snapshot, weights)
            self._catch_up = _make_catch_up(weights, self._snapshot, self._mean)
        else:
            self._average = collectives.make_average(weights, strategy)
            self._average_all = collectives.make_average(every, strategy)
        self._pending: tuple[threading.Thread, dict] | None = None
        self.rates: list[float] | None = None  # batches per second of each worker's share, as last exchanged
        self.deals: list[list[int]] = []  # the epoch's dealings so far, round by round (the same on every worker)
        self._skip = 0  # batches of the stream before this worker's next share

    def dataset(self, config: Config, data: Data, corpus: corpus_lib.Corpus, epoch: int, steps: int) -> tf.data.Dataset:
        """The batches this worker reads in `epoch` (`steps` global batches): its own, or the whole stream."""
        self._skip, self.deals = 0, []
        if self.balance:  # the whole stream: each round's shares are dealt as it goes
            return local_train_dataset(config, data, corpus, epoch, steps, 1, 0)
        return local_train_dataset(config, data, corpus, epoch, steps, self.workers, self.index)

    def round(self, iterator, total: int, last: bool = False) -> tuple[float, float]:
        """Trains this worker's share of the next `total` global batches, then averages; returns the summed loss
        over its share and the seconds spent averaging (with any wait for the other workers)."""
        if self.balance:
            counts = deal(total, self.rates, self.workers)
            mine, skip = counts[self.index], self._skip + sum(counts[: self.index])
            self._skip = sum(counts[self.index + 1 :])
        else:
            counts = [total // self.workers] * self.workers
            mine, skip = counts[self.index], 0
        start = time.perf_counter()
        nll = float(self._train(iterator, tf.constant(mine), tf.constant(skip)))
        trained = time.perf_counter()
        self.deals.append(counts)
        if not self.balance:
            (self._average_all if last else self._average)()
            return nll, time.perf_counter() - trained
        self.finish()  # the previous round's average: w ← w + m − s
        weight = tf.constant(mine / total, tf.float64)
        rate = tf.constant(mine / (trained - start) if mine else 0.0, tf.float64)
        if last:
            self._take_rates(self._average_all(weight, rate).numpy())
        else:
            self._snap()
            result: dict = {}

            def background():
                try:
                    result["rates"] = self._background(weight, rate).numpy()
                except Exception as e:  # noqa: BLE001 - raised again in the training thread by finish()
                    result["error"] = e

            thread = threading.Thread(target=background, name="local-sgd-average", daemon=True)
            thread.start()
            self._pending = (thread, result)
        return nll, time.perf_counter() - trained

    def finish(self) -> None:
        """Waits for the background average, if one runs, and moves this worker's weights onto it."""
        if self._pending is None:
            return
        thread, result = self._pending
        self._pending = None
        thread.join()
        if "error" in result:
            raise result["error"]
        self._catch_up()
        self._take_rates(result["rates"])

    def batches_per_worker(self) -> list[int]:
        """Each worker's batches in the epoch so far, from the dealings every worker shares."""
        return [sum(counts[i] for counts in self.deals) for i in range(self.workers)]

    def record(self) -> dict:
        """The epoch's dealing, for its record in history.json: each worker's batches and, balanced, each round's
        shares."""
        return {"batches_per_worker": self.batches_per_worker(), **({"deals": self.deals} if self.balance else {})}

    def _take_rates(self, rates) -> None:
        old = self.rates or [0.0] * self.workers
        self.rates = [float(r) if r > 0 else o for r, o in zip(rates, old)]  # no share this round: the earlier speed


def _make_assign(targets: list, sources: list):
    @tf.function
    def assign():
        for target, source in zip(targets, sources):
            target.assign(source)

    return assign


def _make_catch_up(weights: list, snapshot: list, mean: list):
    @tf.function
    def catch_up():
        for w, s, m in zip(weights, snapshot, mean):
            w.assign_add(m - s)

    return catch_up
