"""Training under MultiWorkerMirroredStrategy: a custom loop with `strategy.run`.

Keras 3's `fit` fails under MultiWorkerMirroredStrategy
(keras-team/keras#20585), so each step here is `strategy.run` over an
`experimental_distribute_dataset`: every worker reads the same shuffled
windows (a pure function of seed and epoch) and takes its share of each
global batch, gradients are all-reduced, and the result equals one process
training on the same global batches.

Everything but the steps is the one run loop's (`training.loop`): the same
set-up, callbacks (validation, records, early stopping, backup) and resume,
so the run directory is the one `training.trainer` writes. Only the chief
writes it; every other worker validates and stops early by the same history.
The directory must be visible to every worker (one machine, or a shared
filesystem). Killing any worker and restarting the job resumes from the last
finished epoch's backup.

With `config.sync_every` = K > 1 the workers train by local SGD instead
(`local_sgd`).
"""

from __future__ import annotations

import contextlib

import keras
import tensorflow as tf

from nplm_tf.core.config import Config
from nplm_tf.core.run_dir import RunDir, TrainingLock
from nplm_tf.distributed import collectives, local_sgd
from nplm_tf.network import heads, loading, objectives
from nplm_tf.network import step as step_lib
from nplm_tf.training import loop, run_setup, trainer
from nplm_tf.training.data import Data
from nplm_tf.training.strategies import is_chief
from pipelines import corpus as corpus_lib
from pipelines.errors import UserError

STEPS_PER_CALL = 16  # training steps per tf.function call (amortizes Python per step)


def _train_dataset(config: Config, data: Data, corpus: corpus_lib.Corpus, epoch: int, steps: int):
    ds = data.train_dataset(corpus, config, epoch).take(
        steps
    )  # full global batches only, so every worker runs the same number of steps
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return ds.with_options(options)


def train_multi_worker(
    config: Config,
    model_dir: str,
    corpus: corpus_lib.Corpus,
    strategy: tf.distribute.Strategy,
    tail_ngram_dir: str | None = None,
    export: bool = True,
) -> dict:
    """Trains (or resumes) with `strategy` (usually MultiWorkerMirroredStrategy); returns the metrics. The
    chief, which writes `model_dir`, holds its `run_dir.TrainingLock`; with `export` it also writes the
    SavedModel."""
    with TrainingLock(model_dir) as lock:
        return _train_multi_worker(config, model_dir, corpus, strategy, tail_ngram_dir, lock, export)


def _train_multi_worker(
    config: Config,
    model_dir: str,
    corpus: corpus_lib.Corpus,
    strategy: tf.distribute.Strategy,
    tail_ngram_dir: str | None,
    lock: TrainingLock,
    export: bool,
) -> dict:
    chief = is_chief(strategy)
    # Every worker makes the checks that can refuse the run, before the first collective: a worker left
    # waiting there for a chief that refused would fail with a traceback instead of the chief's sentence.
    finished, data, head = run_setup.set_up_run(config, model_dir, corpus, tail_ngram_dir, lock, writer=chief)
    if finished is not None:
        return finished
    try:
        collectives.barrier(strategy)  # the chief has kept the tail's n-gram
    except tf.errors.OpError as e:
        if chief:
            raise
        # The chief refused the run after checks only it can make (another process trains in the directory)
        # and left: its sentence says why; this worker's own would otherwise be a gRPC traceback.
        raise UserError(
            f"another worker of this job stopped before training began ({type(e).__name__}); the chief's "
            f"output says why."
        ) from None
    if head.needs_ngram and head.ngram is None:  # a worker's: the one the chief kept
        head.attach_ngram(loading.load_tail_ngram(RunDir(model_dir), config))
    replicas = strategy.num_replicas_in_sync
    local = config.sync_every > 1
    if local:
        local_sgd.check_local_sgd(strategy)
    model, optimizer = build(config, head, strategy, local=local, counts=data.vocab.counts)
    trainer.init_output_bias(model, data.vocab)
    run = RunDir(model_dir)
    with contextlib.nullcontext() if local else strategy.scope():
        first = loop.resume(model, run, config)  # every worker reads the chief's backup

    steps = data.tokens["train"] // config.batch_size
    if local:
        steps -= steps % replicas  # every worker takes the same number of steps
        rounds = local_sgd.LocalSGD(model, optimizer, strategy, config)
        train_epoch = local_epochs(rounds, config, data, corpus, steps, strategy)
        record_extra = rounds.record
    else:
        train_epoch = synchronous_epochs(model, optimizer, config, data, corpus, steps, strategy)
        record_extra = None
    valid_ds = data.dataset(corpus, "valid", config, head)
    loop.print_start(model, replicas, data)
    # Every worker validates and stops early by the same history; only the chief writes.
    callbacks = loop.callbacks(run, config, data, valid_ds, writer=chief, record_extra=record_extra)
    loop.drive(model, callbacks, config, first, steps, train_epoch)
    collectives.barrier(strategy)  # the chief has written the best weights

    return trainer.finish_run(
        model, data, corpus, config, model_dir, export=export, write=chief, extra={"workers": replicas}
    )


def synchronous_epochs(model, optimizer, config: Config, data: Data, corpus, steps: int, strategy) -> loop.TrainEpoch:
    """An epoch of synchronous SGD (`loop.TrainEpoch`): `STEPS_PER_CALL` all-reduced steps a call."""
    train_steps = make_train_steps(model, optimizer, strategy, config)

    def train_epoch(epoch: int, batch_end) -> float:
        iterator = distributed_train_dataset(config, data, corpus, epoch, steps, strategy)
        loss, done = 0.0, 0
        while done < steps:
            count = min(STEPS_PER_CALL, steps - done)
            loss += float(train_steps(iterator, tf.constant(count)))
            done += count
            batch_end(done, loss / (done * config.batch_size))
        return loss / (steps * config.batch_size)

    return train_epoch


def local_epochs(rounds: local_sgd.LocalSGD, config: Config, data: Data, corpus, steps: int, strategy):
    """An epoch of local SGD (`loop.TrainEpoch`): rounds of each worker's own steps, each ended by an average.
    Within the epoch a worker knows only its own share's loss, so the loss is reported at its end alone."""

    def train_epoch(epoch: int, batch_end) -> float:
        iterator = iter(rounds.dataset(config, data, corpus, epoch, steps))
        replicas = strategy.num_replicas_in_sync
        loss, done = 0.0, 0
        while done < steps:
            total = min(config.sync_every * replicas, steps - done)
            done += total
            loss += rounds.round(iterator, total, last=done == steps)[0]  # the last: weights and moments
            batch_end(done, None)
        return collectives.all_reduce_sum(strategy, loss) / (steps * config.batch_size)

    return train_epoch


def build(config: Config, head: heads.Head, strategy: tf.distribute.Strategy, local: bool = False, counts=None):
    """The model of `head` (the run's, `heads.make`) and its built optimizer, the same initial weights on every
    worker (`trainer.build_compiled_model`): in `strategy`'s scope (mirrored variables), or with `local` outside
    it, each worker's own variables, for local SGD."""
    keras.utils.set_random_seed(config.seed)  # the same initial weights as a run with any other worker count
    scope = None if local else strategy
    model = trainer.build_compiled_model(config, counts, scope, head)
    with contextlib.nullcontext() if local else strategy.scope():
        model.optimizer.build(model.trainable_variables)
    return model, model.optimizer


def make_train_steps(model, optimizer, strategy: tf.distribute.Strategy, config: Config):
    """A tf.function running `count` steps on a distributed iterator; returns the summed loss (−ln P + R(θ) per
    example, as Keras's `fit` reports it)."""
    replicas = strategy.num_replicas_in_sync
    objective = model.objective or objectives.HeadObjective(model.head)

    def step_fn(context, target):  # a sampled objective keys its noise by the optimizer's step
        nll, regularization = step_lib.train_step(
            model, optimizer, objective, context, target, replicas, optimizer.iterations
        )
        return step_lib.summed_loss(nll, regularization)

    @tf.function
    def train_steps(iterator, count):
        total = tf.constant(0.0)
        for _ in tf.range(count):
            total += strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step_fn, args=next(iterator)), axis=None)
        return total

    return train_steps


def distributed_train_dataset(
    config: Config, data: Data, corpus: corpus_lib.Corpus, epoch: int, steps: int, strategy: tf.distribute.Strategy
):
    return iter(strategy.experimental_distribute_dataset(_train_dataset(config, data, corpus, epoch, steps)))
