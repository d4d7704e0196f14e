"""The epochs of every training run, whichever way it calls the training step (`network.step`).

One list of callbacks (`callbacks`) validates, records, stops early, backs up and reports each epoch; one
`resume` starts a run from its backup. Keras's `fit` drives them on one process and under MirroredStrategy;
`drive` makes the same calls for a loop that calls the step itself (`distributed.multi_worker`, where Keras's
`fit` fails: keras-team/keras#20585). So the single-process, mirrored, multi-worker and local-SGD runs differ
only in how they call the step.
"""

from __future__ import annotations

from collections.abc import Callable

import keras
import tensorflow as tf

from nplm_tf.core.config import Config
from nplm_tf.core.run_dir import RunDir
from nplm_tf.training import backup
from nplm_tf.training import callbacks as callbacks_lib
from nplm_tf.training.data import Data


def callbacks(
    run: RunDir,
    config: Config,
    data: Data,
    valid_ds: tf.data.Dataset,
    *,
    epoch: tf.Variable | None = None,
    writer: bool = True,
    announce: bool = True,
    record_extra: Callable[[], dict] | None = None,
    extra: list[keras.callbacks.Callback] = (),
) -> list[keras.callbacks.Callback]:
    """The run's callbacks, in the order they must run.

    Args:
      epoch: a variable the input pipeline reads to shuffle by epoch (`Data.train_dataset`), set as each starts.
      writer: whether this process writes the model directory (a multi-worker job's chief); the others validate
        and stop early with it, and write nothing.
      announce: print each epoch's line (off where Keras's progress bar ends with it) and, off a terminal, a
        progress line within long epochs.
      record_extra: more of each epoch's record in history.json (local SGD's dealing).
    """
    announce = announce and writer  # only the writer speaks
    step_loss = callbacks_lib.StepLoss(run) if writer else None
    recorder = callbacks_lib.ValidationRecorder(
        run,
        valid_ds,
        data.tokens["train"],
        data.vocab.unk_id,
        step_loss,
        announce=announce,
        writer=writer,
        record_extra=record_extra,
    )
    return [
        callbacks_lib.Interruptible(),
        *([callbacks_lib.EpochSeed(epoch)] if epoch is not None else []),
        *([step_loss] if step_loss else []),  # before ValidationRecorder, which keeps its curve
        recorder,
        *([callbacks_lib.EpochProgress(data.tokens["train"], config.batch_size, config.epochs)] if announce else []),
        callbacks_lib.ResumableEarlyStopping(recorder, config.patience, config.min_improvement),
        *(
            [keras.callbacks.TensorBoard(run.logs_dir, write_graph=False, profile_batch=0), backup.EpochBackup(run)]
            if writer
            else []
        ),
        *extra,
    ]


def print_start(model: keras.Model, replicas: int, data: Data) -> None:
    """The run's first line: what trains, on how many replicas, on how much text."""
    print(
        f"training {model.count_params():,} parameters on {replicas} replica(s); "
        f"{data.tokens['train']:,} train tokens, |V| = {data.vocab.size:,}",
        flush=True,
    )


def resume(model: keras.Model, run: RunDir, config: Config) -> int:
    """Loads the run's newest backup into `model` (weights and optimizer state; in the strategy's scope for
    mirrored variables) and returns the first epoch to train: `config.epochs` when the epochs recorded before it
    already ran out of patience (a run stopped early, then killed before its end was written)."""
    first = backup.restore_backup(model, run)
    if first:
        print(f"resuming after epoch {first} of {config.epochs} from {run.backup_dir}", flush=True)
    history = run.read_history()
    before = [history[e]["valid_perplexity"] for e in sorted(history) if e < first]
    if before and callbacks_lib.patience_exhausted(before, config.patience, config.min_improvement):
        return config.epochs
    return first


# An epoch of a loop that calls the step itself: (epoch, batch_end) -> the epoch's mean loss, where
# batch_end(batches done, the running mean loss or None) is called after each call of several steps.
TrainEpoch = Callable[[int, Callable[[int, float | None], None]], float]


def drive(
    model: keras.Model,
    callbacks: list[keras.callbacks.Callback],
    config: Config,
    first_epoch: int,
    steps: int,
    train_epoch: TrainEpoch,
) -> None:
    """Runs epochs `first_epoch`, ... of `config.epochs` with `train_epoch`, calling `callbacks` as Keras's
    `fit` does (train begin and end, epoch begin and end, after each call of steps), and stops where one sets
    `model.stop_training`."""
    hooks = keras.callbacks.CallbackList(callbacks, model=model, epochs=config.epochs, steps=steps, verbose=0)
    model.stop_training = False
    hooks.on_train_begin()
    for epoch in range(first_epoch, config.epochs):
        hooks.on_epoch_begin(epoch)

        def batch_end(done: int, loss: float | None) -> None:
            hooks.on_train_batch_end(done - 1, {} if loss is None else {"loss": loss})

        loss = train_epoch(epoch, batch_end)
        hooks.on_epoch_end(epoch, {"loss": loss})
        if model.stop_training:
            break
    hooks.on_train_end()
