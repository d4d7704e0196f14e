"""Training under MultiWorkerMirroredStrategy: a custom loop with `strategy.run`.

Keras 3's `fit` fails under MultiWorkerMirroredStrategy
(keras-team/keras#20585), so each step here is `strategy.run` over an
`experimental_distribute_dataset`: every worker reads the same shuffled
windows (a pure function of seed and epoch) and takes its share of each
global batch, gradients are all-reduced, and the result equals one process
training on the same global batches.

The run directory is the one `training.trainer` writes (config.json, vocab.tsv,
history.json, best.weights.h5, model.keras, export/, metrics.json), with
checkpoints/ (model, optimizer, epoch) instead of backup/. Only the
chief writes; the other workers write their share of each checkpoint to a
scratch directory and delete it. The directory must be visible to every
worker (one machine, or a shared filesystem). Killing any worker and
restarting the job resumes from the last finished epoch.

With `config.sync_every` = K > 1 the workers train by local SGD instead
(`local_sgd`).
"""

from __future__ import annotations

import contextlib
import shutil
import time

import keras
import tensorflow as tf

from nplm_tf.config import Config
from nplm_tf.distributed import collectives, local_sgd
from nplm_tf.network import heads, loading, objectives, optimizers, scoring
from nplm_tf.network import model as model_lib
from nplm_tf.network import step as step_lib
from nplm_tf.run_dir import RunDir, TrainingLock
from nplm_tf.training import callbacks as callbacks_lib
from nplm_tf.training import run_setup, trainer
from nplm_tf.training.data import Data
from nplm_tf.training.strategies import is_chief
from pipelines import corpus as corpus_lib
from pipelines import interrupts
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
    with contextlib.nullcontext() if local else strategy.scope():
        epoch_done = tf.Variable(0, dtype=tf.int64, trainable=False)
    trainer.init_output_bias(model, data.vocab)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=epoch_done)
    run = RunDir(model_dir)
    shared = run.checkpoints_dir
    scratch = shared if chief else run.worker_scratch(strategy.cluster_resolver.task_id)
    manager = tf.train.CheckpointManager(checkpoint, scratch, max_to_keep=2)
    latest = tf.train.latest_checkpoint(shared)
    if latest:
        checkpoint.restore(latest)
        # Worded as the single-machine trainer's resume line, so one grep finds either.
        print(f"resuming after epoch {int(epoch_done.numpy())} of {config.epochs} from {latest}", flush=True)

    steps = data.tokens["train"] // config.batch_size
    if local:
        steps -= steps % replicas  # every worker takes the same number of steps
        rounds = local_sgd.LocalSGD(model, optimizer, strategy, config)
    else:
        train_steps = make_train_steps(model, optimizer, strategy, config)

    valid_ds = data.dataset(corpus, "valid", config, head)
    batch_nll = scoring.nll_function(model)
    print(
        f"training {model.count_params():,} parameters on {replicas} replica(s); "
        f"{data.tokens['train']:,} train tokens, |V| = {data.vocab.size:,}",
        flush=True,
    )
    first = int(epoch_done.numpy())
    # Every worker computes the same validation perplexities; none waits on the chief's files.
    valid_history = [h["valid_perplexity"] for e, h in sorted(run.read_history().items()) if e < first]
    for epoch in range(first, config.epochs):
        if callbacks_lib.patience_exhausted(valid_history, config.patience, config.min_improvement):
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
                interrupts.raise_if_interrupted()
            nll = collectives.all_reduce_sum(strategy, nll)
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
                interrupts.raise_if_interrupted()
        seconds = time.perf_counter() - start
        callbacks_lib.check_finite(epoch, "train loss", nll)  # every worker stops, before anything is saved
        valid = scoring.score(model, valid_ds, data.vocab.unk_id, batch_nll=batch_nll)
        callbacks_lib.check_finite(epoch, "valid perplexity", valid.perplexity)
        record = {
            "epoch": epoch + 1,
            "train_loss": nll / (steps * config.batch_size),
            "valid_perplexity": valid.perplexity,
            "seconds": seconds,
            "tokens_per_second": steps * config.batch_size / seconds,
            "learning_rate": float(keras.ops.convert_to_numpy(optimizer.learning_rate)),
            **extra,
        }
        valid_history.append(valid.perplexity)
        if chief:
            callbacks_lib.record_epoch(run, model, epoch, record)
            print(
                f"epoch {epoch + 1}: valid perplexity {valid.perplexity:.2f}, "
                f"{record['tokens_per_second']:,.0f} tokens/s",
                flush=True,
            )
        epoch_done.assign(epoch + 1)
        manager.save()  # every worker takes part; only the chief's copy is kept
    if not chief:
        shutil.rmtree(scratch, ignore_errors=True)
    collectives.barrier(strategy)  # the chief has written the best weights

    return trainer.finish_run(
        model, data, corpus, config, model_dir, export=export, write=chief, extra={"workers": replicas}
    )


def build(config: Config, head: heads.Head, strategy: tf.distribute.Strategy, local: bool = False, counts=None):
    """The model of `head` (the run's, `heads.make`) and its built optimizer, the same initial weights on every
    worker.

    In `strategy`'s scope (mirrored variables), or with `local` outside it:
    each worker's own variables, for local SGD.
    """
    keras.utils.set_random_seed(config.seed)  # the same initial weights as a run with any other worker count
    with contextlib.nullcontext() if local else strategy.scope():
        model = model_lib.build_model(config, head)
        optimizer = optimizers.make_optimizer(config, head)
        optimizer.build(model.trainable_variables)
    model.objective = objectives.of_config(config, head, counts)
    return model, optimizer


def make_train_steps(model, optimizer, strategy: tf.distribute.Strategy, config: Config):
    """A tf.function running `count` steps on a distributed iterator; returns the summed -ln P."""
    replicas = strategy.num_replicas_in_sync
    objective = model.objective or objectives.HeadObjective(model.head)

    def step_fn(context, target):  # a sampled objective keys its noise by the optimizer's step
        nll, _ = step_lib.train_step(model, optimizer, objective, context, target, replicas, optimizer.iterations)
        return tf.reduce_sum(nll)

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
