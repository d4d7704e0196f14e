"""Keras callbacks that keep training resumable and its record exact."""

from __future__ import annotations

import json
import os
import time

import keras
import tensorflow as tf

from nplm_tf import evaluate_lib
from nplm_tf.config import ConfigError
from pipelines import files

HISTORY_FILE = "history.json"
BEST_WEIGHTS = "best.weights.h5"


def write_json(path: str, value) -> None:
    """Writes atomically: a crash never leaves a half-written file behind."""
    files.write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def read_json(path: str):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_history(model_dir: str) -> dict[int, dict]:
    path = os.path.join(model_dir, HISTORY_FILE)
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return {int(k): v for k, v in json.load(f).items()}


class EpochSeed(keras.callbacks.Callback):
    """Tells the input pipeline which epoch starts, so its shuffle is a function of it."""

    def __init__(self, epoch: tf.Variable):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch.assign(epoch)


class ValidationRecorder(keras.callbacks.Callback):
    """Adds the exact validation perplexity to the logs and records each epoch.

    The record (`history.json`: train loss, valid perplexity, seconds,
    tokens/s, learning rate) is keyed by epoch, so an epoch re-run after a
    resume overwrites its own entry. The best-by-validation weights are
    written (atomically) before the record that names them, so a crash between
    the two never leaves a record claiming weights that were not saved.
    Callbacks after this one see `val_perplexity` in the logs.
    """

    def __init__(self, model_dir: str, valid_dataset: tf.data.Dataset, train_tokens: int, unk_id: int):
        super().__init__()
        self.model_dir = model_dir
        self.valid_dataset = valid_dataset
        self.train_tokens = train_tokens
        self.unk_id = unk_id
        self._batch_nll = None

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        seconds = time.perf_counter() - self._start
        if self._batch_nll is None:
            self._batch_nll = evaluate_lib.nll_function(self.model)
        valid = evaluate_lib.score(self.model, self.valid_dataset, self.unk_id, batch_nll=self._batch_nll)
        logs["val_perplexity"] = valid.perplexity
        record_epoch(self.model_dir, self.model, epoch, {
            "epoch": epoch + 1,
            "train_loss": float(logs.get("loss", float("nan"))),
            "valid_perplexity": valid.perplexity,
            "seconds": seconds,
            "tokens_per_second": self.train_tokens / seconds,
            "learning_rate": float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)),
        })
        print(
            f"epoch {epoch + 1}: valid perplexity {valid.perplexity:.2f}, "
            f"{self.train_tokens / seconds:,.0f} tokens/s",
            flush=True,
        )


def record_epoch(model_dir: str, model: keras.Model, epoch: int, record: dict) -> None:
    """Saves the weights if this epoch is the best so far, then its history entry (keyed by epoch)."""
    history = read_history(model_dir)
    others = [h["valid_perplexity"] for e, h in history.items() if e != epoch]
    if not others or record["valid_perplexity"] < min(others):
        files.replace_atomically(os.path.join(model_dir, BEST_WEIGHTS), model.save_weights)
    history[epoch] = record
    write_json(os.path.join(model_dir, HISTORY_FILE), {str(k): v for k, v in sorted(history.items())})


def patience_exhausted(valid_perplexities: list[float], patience: int) -> bool:
    """Whether the last `patience` epochs brought no better validation perplexity (prints why)."""
    if not valid_perplexities:
        return False
    best = min(range(len(valid_perplexities)), key=valid_perplexities.__getitem__)
    if len(valid_perplexities) - 1 - best >= patience:
        print(f"stopping early: no better valid perplexity for {patience} epochs", flush=True)
        return True
    return False


class ResumableEarlyStopping(keras.callbacks.Callback):
    """Stops after `patience` epochs without a better valid perplexity.

    Unlike `keras.callbacks.EarlyStopping`, its state is the recorded history,
    so a resumed run stops at the same epoch as an uninterrupted one.
    """

    def __init__(self, model_dir: str, patience: int):
        super().__init__()
        self.model_dir = model_dir
        self.patience = patience

    def on_epoch_end(self, epoch, logs=None):
        history = read_history(self.model_dir)
        done = [history[e]["valid_perplexity"] for e in sorted(history) if e <= epoch]
        if patience_exhausted(done, self.patience):
            self.model.stop_training = True


BACKUP_STATE = "state.json"


class EpochBackup(keras.callbacks.Callback):
    """Saves weights and optimizer state after every epoch, atomically, keeping two generations.

    Each epoch's state goes to `backup/epoch-NNNN.weights.h5` (through
    `pipelines.files.replace_atomically`), and only then does `backup/state.json` name
    it, so an interrupt or a kill at any instant leaves a complete pair behind:
    the file the state names and the one before it. (Keras's BackupAndRestore
    writes its weights file in place; a Ctrl-C during that write left a file
    that could not be loaded.) `restore_backup` reads it back.
    """

    def __init__(self, backup_dir: str):
        super().__init__()
        self.backup_dir = backup_dir

    def on_epoch_end(self, epoch, logs=None):
        os.makedirs(self.backup_dir, exist_ok=True)
        name = f"epoch-{epoch + 1:04d}.weights.h5"
        files.replace_atomically(os.path.join(self.backup_dir, name), self.model.save_weights)
        state_path = os.path.join(self.backup_dir, BACKUP_STATE)
        previous = read_json(state_path)["generations"][:1] if os.path.isfile(state_path) else []
        generations = [{"epoch": epoch + 1, "weights": name}] + [g for g in previous if g["weights"] != name]
        write_json(state_path, {"generations": generations})
        keep = {g["weights"] for g in generations}
        for f in os.listdir(self.backup_dir):
            if f.startswith("epoch-") and f not in keep:
                os.remove(os.path.join(self.backup_dir, f))


def restore_backup(model: keras.Model, backup_dir: str) -> int:
    """Loads the newest loadable generation `EpochBackup` wrote; returns its epoch count (0: none)."""
    state_path = os.path.join(backup_dir, BACKUP_STATE)
    if os.path.isfile(state_path):
        generations = read_json(state_path)["generations"]
    else:
        generations = _keras_backup_generations(backup_dir)
        if not generations:
            return 0
    if not model.optimizer.built:  # its variables (iterations, slots) must exist to be loaded
        model.optimizer.build(model.trainable_variables)
    failures = []
    for generation in generations:
        try:
            model.load_weights(os.path.join(backup_dir, generation["weights"]))
            return generation["epoch"]
        except (OSError, ValueError) as e:  # truncated or damaged on disk: try the one before
            failures.append(f"{generation['weights']}: {str(e).splitlines()[0]}")
    raise ConfigError(f"no backup in {backup_dir} could be loaded ({'; '.join(failures)}); "
                      "delete that directory to retrain from scratch.")


def _keras_backup_generations(backup_dir: str) -> list[dict]:
    """What keras.callbacks.BackupAndRestore left (runs from before EpochBackup), newest first."""
    found = []
    for suffix in ("", ".bkp"):
        weights = os.path.join(backup_dir, "latest.weights.h5" + suffix)
        metadata = os.path.join(backup_dir, "training_metadata.json" + suffix)
        if os.path.isfile(weights) and os.path.isfile(metadata):
            found.append({"epoch": read_json(metadata)["epoch"], "weights": os.path.basename(weights)})
    return found
