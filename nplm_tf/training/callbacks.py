"""Keras callbacks that keep training resumable and its record exact."""

from __future__ import annotations

import contextlib
import math
import os
import time

import keras
import tensorflow as tf

from nplm_tf.core.run_dir import RunDir
from nplm_tf.network import scoring
from pipelines import interrupts
from pipelines.errors import UserError

LOSS_EVERY = 256  # training steps between two points of the loss curve


class TrainingDiverged(UserError):
    """The training loss or the validation perplexity is no longer a finite number."""


def check_finite(epoch: int, what: str, value: float, where: str = "") -> None:
    """Stops the run, before anything of epoch `epoch` (0-based) is saved, once `value` is not finite."""
    if not math.isfinite(value):
        kept = (
            f"epochs 1-{epoch} stay saved: --epochs={epoch} ends this run with them" if epoch else "no epoch was saved"
        )
        raise TrainingDiverged(
            f"training diverged in epoch {epoch + 1} ({what} {value}{where}); lower --learning_rate and train in a "
            f"new --model_dir ({kept})."
        )


class EpochSeed(keras.callbacks.Callback):
    """Tells the input pipeline which epoch starts, so its shuffle is a function of it."""

    def __init__(self, epoch: tf.Variable):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch.assign(epoch)


class Interruptible(keras.callbacks.Callback):
    """Ends training with KeyboardInterrupt at the first step after a Ctrl-C, even one whose first raise Python
    dropped (`pipelines.interrupts`)."""

    def on_train_batch_end(self, batch, logs=None):
        interrupts.raise_if_interrupted()


class StepLoss(keras.callbacks.Callback):
    """The training loss every `every` steps: to TensorBoard (`logs/train`, tag `step_loss`) and as a curve.

    Keras reports the running mean of the epoch's loss at each batch end; the
    mean over each interval is derived from two running means, so each point is
    the mean loss of the steps since the previous one. `curve` holds the
    epoch's points as [global step, loss] (ValidationRecorder keeps them in
    history.json), so even a one-epoch run has a curve to plot.
    """

    def __init__(self, run: RunDir, every: int = LOSS_EVERY):
        super().__init__()
        self.every = every
        self.logdir = os.path.join(run.logs_dir, "train")  # beside the epoch scalars of keras.callbacks.TensorBoard
        self._writer = None
        self.curve: list[list[float]] = []

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch, self._offset = epoch, epoch * (self.params.get("steps") or 0)
        self._done, self._sum, self.curve = 0, 0.0, []

    def on_train_batch_end(self, batch, logs=None):
        if logs and "loss" in logs and batch + 1 - self._done >= self.every:
            self._point(batch + 1, float(logs["loss"]))

    def on_epoch_end(self, epoch, logs=None):
        steps = self.params.get("steps")
        if logs and "loss" in logs and steps and steps > self._done:
            self._point(steps, float(logs["loss"]))

    def _point(self, done: int, running_mean: float) -> None:
        check_finite(self._epoch, "train loss", running_mean, f" by step {done}")
        total = running_mean * done
        loss = (total - self._sum) / (done - self._done)
        self._done, self._sum = done, total
        step = self._offset + done
        self.curve.append([step, loss])
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.logdir)
        with self._writer.as_default():
            tf.summary.scalar("step_loss", loss, step=step)
        self._writer.flush()


PROGRESS_EVERY = 300.0  # seconds between two progress lines within an epoch (`EpochProgress`)


class EpochProgress(keras.callbacks.Callback):
    """Where no progress bar shows (standard output not a terminal: a log file, a batch job), a line every
    `every` seconds of a long epoch: how far it is, how fast, and about how long is left. A full softmax over a
    large vocabulary can take half an hour an epoch; epochs shorter than `every` print nothing more."""

    def __init__(self, train_tokens: int, batch_size: int, epochs: int, every: float = PROGRESS_EVERY):
        super().__init__()
        self.train_tokens, self.batch_size, self.epochs, self.every = train_tokens, batch_size, epochs, every

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._start = self._last = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if now - self._last < self.every:
            return
        self._last = now
        done = min((batch + 1) * self.batch_size, self.train_tokens)
        rate = done / (now - self._start)
        left = (self.train_tokens - done) / rate
        print(
            f"epoch {self._epoch + 1}/{self.epochs}: {done / self.train_tokens:.0%} of its {self.train_tokens:,} "
            f"tokens, {rate:,.0f} tokens/s, about {_minutes(left)} left",
            flush=True,
        )


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


class ValidationRecorder(keras.callbacks.Callback):
    """Adds the exact validation perplexity to the logs and records each epoch.

    The record (`history.json`: train loss, valid perplexity, seconds,
    tokens/s, learning rate) is keyed by epoch, so an epoch re-run after a
    resume overwrites its own entry. The best-by-validation weights are
    written (atomically) before the record that names them, so a crash between
    the two never leaves a record claiming weights that were not saved.
    Callbacks after this one see `val_perplexity` in the logs, and `history`
    holds every record (read from the directory as training begins): a
    process that does not write (`writer` off: a multi-worker job's other
    workers) keeps the same history as the one that does.
    """

    def __init__(
        self,
        run: RunDir,
        valid_dataset: tf.data.Dataset,
        train_tokens: int,
        unk_id: int,
        step_loss: StepLoss | None = None,
        announce: bool = True,
        writer: bool = True,
        record_extra=None,
    ):
        super().__init__()
        self.announce = announce  # print the epoch's line (off where Keras's progress bar ends with it)
        self.writer = writer
        self.record_extra = record_extra  # () -> more of the epoch's record
        self.history: dict[int, dict] = {}
        self.run = run
        self.valid_dataset = valid_dataset
        self.train_tokens = train_tokens
        self.unk_id = unk_id
        self.step_loss = step_loss
        self._batch_nll = None

    def on_train_begin(self, logs=None):
        self.history = self.run.read_history()

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        seconds = time.perf_counter() - self._start
        if self._batch_nll is None:
            self._batch_nll = scoring.nll_function(self.model)
        check_finite(epoch, "train loss", float(logs.get("loss", 0.0)))
        curve = {"loss_curve": self.step_loss.curve} if self.step_loss is not None else {}
        with averaged_weights(self.model):  # --average: the average is validated and kept as the best
            validating = time.perf_counter()
            valid = scoring.score(self.model, self.valid_dataset, self.unk_id, batch_nll=self._batch_nll)
            validating = time.perf_counter() - validating
            check_finite(epoch, "valid perplexity", valid.perplexity)
            record = {
                "epoch": epoch + 1,
                "train_loss": float(logs.get("loss", float("nan"))),
                "valid_perplexity": valid.perplexity,
                "seconds": seconds,
                "tokens_per_second": self.train_tokens / seconds,
                "learning_rate": float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)),
                **curve,
                **(self.record_extra() if self.record_extra else {}),
            }
            self.history[epoch] = record
            if self.writer:
                record_epoch(self.run, self.model, epoch, self.history)
        logs["val_perplexity"] = valid.perplexity
        logs["tokens_per_s"] = round(self.train_tokens / seconds)
        if self.announce:
            epochs = self.params.get("epochs") if self.params else None
            print(
                f"epoch {epoch + 1}{f'/{epochs}' if epochs else ''}: train loss {logs.get('loss', float('nan')):.4f}, "
                f"valid perplexity {valid.perplexity:.2f}, {seconds:,.0f} s, {self.train_tokens / seconds:,.0f} tokens/s"
                # the exact validation is not training's time; said where it is a share worth knowing
                + (f" (then {validating:,.0f} s validating)" if validating >= max(1.0, 0.2 * seconds) else ""),
                flush=True,
            )


@contextlib.contextmanager
def averaged_weights(model: keras.Model):
    """With an optimizer that keeps a moving average of the weights (`--average`), the model holds the average
    inside the block and its own weights again after it (training goes on from them); else nothing changes."""
    optimizer = model.optimizer
    if not getattr(optimizer, "use_ema", False) or not optimizer.built:
        yield
        return
    own = [v.numpy() for v in model.trainable_variables]
    optimizer.finalize_variable_values(model.trainable_variables)
    try:
        yield
    finally:
        for variable, value in zip(model.trainable_variables, own, strict=True):
            variable.assign(value)


def record_epoch(run: RunDir, model: keras.Model, epoch: int, history: dict[int, dict]) -> None:
    """Saves the weights if epoch `epoch` is the best of `history` (which holds its record, keyed by epoch), then
    `history` as history.json."""
    others = [h["valid_perplexity"] for e, h in history.items() if e != epoch]
    if not others or history[epoch]["valid_perplexity"] < min(others):
        run.save_best_weights(model)
    run.write_history(history)


def patience_exhausted(valid_perplexities: list[float], patience: int, min_improvement: float = 0.0) -> bool:
    """Whether the last `patience` epochs brought no better validation perplexity (prints why): better is below
    the best so far by more than `min_improvement` of it (0: below it at all), as Keras's `min_delta`, relative."""
    best, waited = float("inf"), 0
    for perplexity in valid_perplexities:
        if perplexity < best * (1 - min_improvement):
            best, waited = perplexity, 0
        else:
            waited += 1
    if valid_perplexities and waited >= patience:
        what = (
            f"valid perplexity {min_improvement:.1%} below the best" if min_improvement else "better valid perplexity"
        )
        print(f"stopping early: no {what} for {patience} epochs", flush=True)
        return True
    return False


class ResumableEarlyStopping(keras.callbacks.Callback):
    """Stops after `patience` epochs without a better valid perplexity.

    Unlike `keras.callbacks.EarlyStopping`, its state is the recorded history
    (`recorder`'s, which runs before it), so a resumed run stops at the same
    epoch as an uninterrupted one, and every worker of a job at the same epoch.
    """

    def __init__(self, recorder: ValidationRecorder, patience: int, min_improvement: float = 0.0):
        super().__init__()
        self.recorder = recorder
        self.patience, self.min_improvement = patience, min_improvement

    def on_epoch_end(self, epoch, logs=None):
        history = self.recorder.history
        done = [history[e]["valid_perplexity"] for e in sorted(history) if e <= epoch]
        if patience_exhausted(done, self.patience, self.min_improvement):
            self.model.stop_training = True
