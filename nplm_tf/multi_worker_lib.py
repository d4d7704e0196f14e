"""Training under MultiWorkerMirroredStrategy: a custom loop with `strategy.run`.

Keras 3's `fit` fails under MultiWorkerMirroredStrategy
(keras-team/keras#20585), so each step here is `strategy.run` over an
`experimental_distribute_dataset`: every worker reads the same shuffled
windows (a pure function of seed and epoch) and takes its share of each
global batch, gradients are all-reduced, and the result equals one process
training on the same global batches.

The run directory is the one `train_lib` writes (config.json, vocab.tsv,
history.json, best.weights.h5, model.keras, export/, metrics.json), with
checkpoints/ (model, optimizer, epoch) instead of backup/. Only the
chief writes; the other workers write their share of each checkpoint to a
scratch directory and delete it. The directory must be visible to every
worker (one machine, or a shared filesystem). Killing any worker and
restarting the job resumes from the last finished epoch.

With `config.sync_every` = K > 1 the workers do not all-reduce gradients:
each trains its own copy of the model on every W-th global batch (whole
`batch_size` batches, W workers) and every K of its steps the copies'
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

import contextlib
import os
import shutil
import threading
import time

import keras
import tensorflow as tf

from nplm_tf import callbacks as callbacks_lib
from nplm_tf import evaluate_lib, train_lib
from nplm_tf import model as model_lib
from nplm_tf.config import Config, ConfigError
from pipelines import corpus as corpus_lib
from pipelines import windows

CHECKPOINTS = "checkpoints"
STEPS_PER_CALL = 16  # training steps per tf.function call (amortizes Python per step)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (resolver.task_type == "worker" and resolver.task_id == 0
                                             and "chief" not in resolver.cluster_spec().as_dict())


def _train_dataset(config: Config, data: train_lib.Data, corpus: corpus_lib.Corpus, epoch: int, steps: int):
    ds = windows.window_dataset(corpus["train"], data.vocab, config.order, config.batch_size, data.tokens["train"],
                                shuffle=True, shuffle_buffer=config.shuffle_buffer, seed=config.seed, epoch=epoch)
    ds = ds.take(steps)  # full global batches only, so every worker runs the same number of steps
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return ds.with_options(options)


def train_multi_worker(config: Config, model_dir: str, corpus: corpus_lib.Corpus,
                       strategy: tf.distribute.Strategy) -> dict:
    """Trains (or resumes) with `strategy` (usually MultiWorkerMirroredStrategy); returns the metrics."""
    chief = is_chief(strategy)
    if chief:
        train_lib.check_model_dir(config, model_dir)
    finished = train_lib.finished_metrics(config, model_dir)
    if finished is not None:
        return finished
    data = train_lib.prepare_data(config, corpus, model_dir if chief else None)
    replicas = strategy.num_replicas_in_sync
    local = config.sync_every > 1
    if local:
        check_local_sgd(strategy)
    model, optimizer = build(config, data.vocab.size, strategy, local=local)
    with contextlib.nullcontext() if local else strategy.scope():
        epoch_done = tf.Variable(0, dtype=tf.int64, trainable=False)
    train_lib.init_output_bias(model, data.vocab)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=epoch_done)
    shared = os.path.join(model_dir, CHECKPOINTS)
    scratch = shared if chief else os.path.join(model_dir, f".{CHECKPOINTS}-worker-{strategy.cluster_resolver.task_id}")
    manager = tf.train.CheckpointManager(checkpoint, scratch, max_to_keep=2)
    latest = tf.train.latest_checkpoint(shared)
    if latest:
        checkpoint.restore(latest)
        print(f"resumed from {latest} (epoch {int(epoch_done.numpy())} done)", flush=True)

    steps = data.tokens["train"] // config.batch_size
    if local:
        steps -= steps % replicas  # every worker takes the same number of steps
        rounds = LocalSGD(model, optimizer, strategy, config)
    else:
        train_steps = make_train_steps(model, optimizer, strategy, config)

    valid_ds = data.dataset(corpus, "valid", config)
    batch_nll = evaluate_lib.nll_function(model)
    print(f"training {model.count_params():,} parameters on {replicas} replica(s); "
          f"{data.tokens['train']:,} train tokens, |V| = {data.vocab.size:,}", flush=True)
    first = int(epoch_done.numpy())
    # Every worker computes the same validation perplexities; none waits on the chief's files.
    valid_history = [h["valid_perplexity"] for e, h in sorted(callbacks_lib.read_history(model_dir).items()) if e < first]
    for epoch in range(first, config.epochs):
        if callbacks_lib.patience_exhausted(valid_history, config.patience):
            break
        start = time.perf_counter()
        extra = {}
        if local:
            iterator = iter(rounds.dataset(config, data, corpus, epoch, steps))
            nll, done = 0.0, 0
            while done < steps:
                total = min(config.sync_every * replicas, steps - done)
                done += total
                nll += rounds.round(iterator, total, last=done == steps)[0]  # the last: weights and moments
            nll = all_reduce_sum(strategy, nll)
            extra["batches_per_worker"] = rounds.batches_per_worker()
            if config.balance_workers:
                extra["deals"] = rounds.deals
        else:
            iterator = distributed_train_dataset(config, data, corpus, epoch, steps, strategy)
            nll, done = 0.0, 0
            while done < steps:
                count = min(STEPS_PER_CALL, steps - done)
                nll += float(train_steps(iterator, tf.constant(count)))
                done += count
        seconds = time.perf_counter() - start
        valid = evaluate_lib.score(model, valid_ds, data.vocab.unk_id, batch_nll=batch_nll)
        record = {"epoch": epoch + 1, "train_loss": nll / (steps * config.batch_size),
                  "valid_perplexity": valid.perplexity, "seconds": seconds,
                  "tokens_per_second": steps * config.batch_size / seconds,
                  "learning_rate": float(keras.ops.convert_to_numpy(optimizer.learning_rate)), **extra}
        valid_history.append(valid.perplexity)
        if chief:
            callbacks_lib.record_epoch(model_dir, model, epoch, record)
            print(f"epoch {epoch + 1}: valid perplexity {valid.perplexity:.2f}, "
                  f"{record['tokens_per_second']:,.0f} tokens/s", flush=True)
        epoch_done.assign(epoch + 1)
        manager.save()  # every worker takes part; only the chief's copy is kept
    if not chief:
        shutil.rmtree(scratch, ignore_errors=True)
    _barrier(strategy)  # the chief has written the best weights

    return train_lib.finish_run(model, data, corpus, config, model_dir, write=chief, extra={"workers": replicas})


def build(config: Config, vocab_size: int, strategy: tf.distribute.Strategy, local: bool = False):
    """The model and its built optimizer, the same initial weights on every worker.

    In `strategy`'s scope (mirrored variables), or with `local` outside it:
    each worker's own variables, for local SGD.
    """
    keras.utils.set_random_seed(config.seed)  # the same initial weights as a run with any other worker count
    with contextlib.nullcontext() if local else strategy.scope():
        model = model_lib.build_model(config, vocab_size)
        optimizer = model_lib.make_optimizer(config)
        optimizer.build(model.trainable_variables)
    return model, optimizer


def make_train_steps(model, optimizer, strategy: tf.distribute.Strategy, config: Config):
    """A tf.function running `count` steps on a distributed iterator; returns the summed -ln P."""
    replicas = strategy.num_replicas_in_sync
    global_batch = float(config.batch_size)

    def step_fn(context, target):
        with tf.GradientTape() as tape:
            nll = model_lib.token_nll(target, model(context, training=True))  # (per-replica batch,)
            loss = tf.reduce_sum(nll) / global_batch  # summed over replicas: the global mean
            if model.losses:
                loss += tf.add_n(model.losses) / replicas  # R(θ): once in total
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return tf.reduce_sum(nll)

    @tf.function
    def train_steps(iterator, count):
        total = tf.constant(0.0)
        for _ in tf.range(count):
            total += strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step_fn, args=next(iterator)), axis=None)
        return total

    return train_steps


def check_local_sgd(strategy: tf.distribute.Strategy) -> None:
    if len(strategy.extended.worker_devices) != 1:
        raise ConfigError(f"sync_every > 1 trains one model per worker process, but this worker has "
                          f"{len(strategy.extended.worker_devices)} devices; use sync_every=1.")


def worker_index(strategy: tf.distribute.Strategy) -> int:
    """This worker's replica id among all workers (one replica each): its share of the batches."""
    ids = strategy.run(lambda: tf.constant(tf.distribute.get_replica_context().replica_id_in_sync_group))
    return int(strategy.experimental_local_results(ids)[0])


def local_train_dataset(config: Config, data: train_lib.Data, corpus: corpus_lib.Corpus, epoch: int, steps: int,
                        workers: int, index: int) -> tf.data.Dataset:
    """Every `workers`-th whole global batch from `index`: the same windows as one process, dealt out."""
    ds = windows.window_dataset(corpus["train"], data.vocab, config.order, config.batch_size, data.tokens["train"],
                                shuffle=True, shuffle_buffer=config.shuffle_buffer, seed=config.seed, epoch=epoch)
    return ds.take(steps).shard(workers, index)


def make_local_train_steps(model, optimizer):
    """A tf.function that passes over `skip` batches of a plain iterator, then runs `count` steps of this worker's
    own model on the next ones; returns Σ -ln P."""

    @tf.function
    def train_steps(iterator, count, skip):
        for _ in tf.range(skip):
            next(iterator)  # another worker's batch
        total = tf.constant(0.0)
        for _ in tf.range(count):
            context, target = next(iterator)
            with tf.GradientTape() as tape:
                nll = model_lib.token_nll(target, model(context, training=True))
                loss = tf.reduce_mean(nll)
                if model.losses:
                    loss += tf.add_n(model.losses)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply(grads, model.trainable_variables)
            total += tf.reduce_sum(nll)
        return total

    return train_steps


def _float_variables(optimizer) -> list:
    return [v for v in optimizer.variables if keras.backend.is_float_dtype(v.dtype)]  # moments (and a fixed rate)


# The weights in packs of up to 4 MiB, all-reduced concurrently: 13 ms against 18 ms in one tensor each for
# MLP9's 1.86 M floats, two workers on 127.0.0.1 (20 averages, one core each); the same means.
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
        sums = _all_reduce(strategy, tf.distribute.ReduceOp.SUM, lambda replica: (
            [tf.identity(v) * tf.cast(weight, v.dtype) for v in sources]
            + [tf.one_hot(replica, workers) * tf.cast(rate, tf.float32)]))  # float32: packed with the values
        for target, value in zip(targets, sums[:-1]):
            target.assign(value)
        return sums[-1]

    return weighted_sum


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
    for i in sorted(range(workers), key=lambda i: (counts[i] - quotas[i], i))[:total - sum(counts)]:
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
        self.index = worker_index(strategy)
        self.balance = config.balance_workers
        self._train = make_local_train_steps(model, optimizer)
        weights = model.trainable_variables
        every = weights + _float_variables(optimizer)
        if self.balance:
            self._snapshot = [tf.Variable(v, trainable=False) for v in weights]
            self._mean = [tf.Variable(v, trainable=False) for v in weights]
            self._background = make_weighted_sum(self._snapshot, self._mean, strategy)
            self._average_all = make_weighted_sum(every, every, strategy)
            self._snap = _make_assign(self._snapshot, weights)
            self._catch_up = _make_catch_up(weights, self._snapshot, self._mean)
        else:
            self._average = make_average(weights, strategy)
            self._average_all = make_average(every, strategy)
        self._pending: tuple[threading.Thread, dict] | None = None
        self.rates: list[float] | None = None  # batches per second of each worker's share, as last exchanged
        self.deals: list[list[int]] = []  # the epoch's dealings so far, round by round (the same on every worker)
        self._skip = 0  # batches of the stream before this worker's next share

    def dataset(self, config: Config, data: train_lib.Data, corpus: corpus_lib.Corpus, epoch: int,
                steps: int) -> tf.data.Dataset:
        """The batches this worker reads in `epoch` (`steps` global batches): its own, or the whole stream."""
        self._skip, self.deals = 0, []
        if self.balance:  # the whole stream: each round's shares are dealt as it goes
            return local_train_dataset(config, data, corpus, epoch, steps, 1, 0)
        return local_train_dataset(config, data, corpus, epoch, steps, self.workers, self.index)

    def round(self, iterator, total: int, last: bool = False) -> tuple[float, float]:
        """Trains this worker's share of the next `total` global batches, then averages; returns Σ -ln P over its
        share and the seconds spent averaging (with any wait for the other workers)."""
        if self.balance:
            counts = deal(total, self.rates, self.workers)
            mine, skip = counts[self.index], self._skip + sum(counts[:self.index])
            self._skip = sum(counts[self.index + 1:])
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


def all_reduce_sum(strategy: tf.distribute.Strategy, value: float) -> float:
    with tf.device(strategy.extended.worker_devices[0]):
        total = tf.constant(value, tf.float64)
    return float(strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.identity(total)), axis=None))


def distributed_train_dataset(config: Config, data: train_lib.Data, corpus: corpus_lib.Corpus, epoch: int,
                              steps: int, strategy: tf.distribute.Strategy):
    return iter(strategy.experimental_distribute_dataset(_train_dataset(config, data, corpus, epoch, steps)))


def _barrier(strategy: tf.distribute.Strategy) -> None:
    """An all-reduce every worker must reach: what one wrote before it, the others can read after."""
    strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)
