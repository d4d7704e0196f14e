"""Resumable training: weights and optimizer state after every epoch, atomically, two generations kept."""

from __future__ import annotations

import os

import keras
import tensorflow as tf

from nplm_tf.core.config import ConfigError
from nplm_tf.core.run_dir import RunDir
from pipelines import files


class EpochBackup(keras.callbacks.Callback):
    """Saves weights and optimizer state after every epoch, atomically, keeping two generations.

    Each epoch's state goes to `backup/epoch-NNNN.weights.h5` (through
    `pipelines.files.replace_atomically`), and only then does `backup/state.json` name
    it, so an interrupt or a kill at any instant leaves a complete pair behind:
    the file the state names and the one before it. (Keras's BackupAndRestore
    writes its weights file in place; a Ctrl-C during that write left a file
    that could not be loaded.) `restore_backup` reads it back.
    """

    def __init__(self, run: RunDir):
        super().__init__()
        self.run = run
        self.backup_dir = run.backup_dir

    def on_epoch_end(self, epoch, logs=None):
        os.makedirs(self.backup_dir, exist_ok=True)
        name = f"epoch-{epoch + 1:04d}.weights.h5"
        files.replace_atomically(os.path.join(self.backup_dir, name), self.model.save_weights)
        previous = (self.run.read_backup_state() or [])[:1]
        generations = [{"epoch": epoch + 1, "weights": name}] + [g for g in previous if g["weights"] != name]
        self.run.write_backup_state(generations)
        keep = {g["weights"] for g in generations}
        for f in os.listdir(self.backup_dir):
            if f.startswith("epoch-") and f not in keep:
                os.remove(os.path.join(self.backup_dir, f))


def restore_backup(model: keras.Model, run: RunDir) -> int:
    """Loads the newest loadable generation `EpochBackup` wrote; returns its epoch count (0: none)."""
    backup_dir = run.backup_dir
    generations = run.read_backup_state()
    if not model.optimizer.built:  # its variables (iterations, slots) must exist to be loaded
        model.optimizer.build(model.trainable_variables)
    if generations is None:
        generations = _keras_backup_generations(backup_dir)
        if not generations:
            return _restore_checkpoint(model, run)
    failures = []
    for generation in generations:
        try:
            model.load_weights(os.path.join(backup_dir, generation["weights"]))
            return generation["epoch"]
        except (OSError, ValueError) as e:  # truncated or damaged on disk: try the one before
            failures.append(f"{generation['weights']}: {str(e).splitlines()[0]}")
    raise ConfigError(
        f"no backup in {backup_dir} could be loaded ({'; '.join(failures)}); "
        "delete that directory to retrain from scratch."
    )


def _restore_checkpoint(model: keras.Model, run: RunDir) -> int:
    """Loads what a multi-worker run left in checkpoints/ (runs from before it backed up as every run does);
    returns its epoch count (0: none)."""
    latest = tf.train.latest_checkpoint(run.checkpoints_dir) if os.path.isdir(run.checkpoints_dir) else None
    if latest is None:
        return 0
    epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
    tf.train.Checkpoint(model=model, optimizer=model.optimizer, epoch=epoch).restore(latest).expect_partial()
    return int(epoch.numpy())


def _keras_backup_generations(backup_dir: str) -> list[dict]:
    """What keras.callbacks.BackupAndRestore left (runs from before EpochBackup), newest first."""
    found = []
    for suffix in ("", ".bkp"):
        weights = os.path.join(backup_dir, "latest.weights.h5" + suffix)
        metadata = os.path.join(backup_dir, "training_metadata.json" + suffix)
        if os.path.isfile(weights) and os.path.isfile(metadata):
            found.append({"epoch": files.read_json(metadata)["epoch"], "weights": os.path.basename(weights)})
    return found
