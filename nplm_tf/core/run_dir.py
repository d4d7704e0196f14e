"""The model directory: every file name in it, and reading and writing them, in one place.

A training run (`nplm_tf.train`) writes

    config.json       the full configuration (a re-run with another one is refused)
    vocab.tsv         the vocabulary with train counts, in id order
    history.json      per epoch: train loss (and its curve over steps), valid perplexity, seconds, tokens/s, rate
    best.weights.h5   the best-by-validation weights
    backup/           weights + optimizer state after each epoch, and state.json naming them
    checkpoints/      what multi-worker runs kept in place of backup/ before they backed up as every run does
    logs/             TensorBoard logs
    model.keras       the best model in Keras's format
    export/<version>/ the SavedModel
    corpus.json       the corpus flags it was trained with (evaluate and query read the same corpus)
    mixture.json      after `evaluate --ngram_dir --save_mixture`: the fitted mixture weights
    tail_ngram/       with --shortlist and an n-gram tail: its Kneser-Ney model (an n-gram directory)
    metrics.json      written last: the run's results
    .train.lock       locked by the process training in the directory (`TrainingLock`)

and an n-gram directory (`nplm_tf.ngram`) holds vocab.tsv, ngram.npz,
model.arpa and metrics.json. Every write is atomic (`pipelines.files`).
"""

from __future__ import annotations

import fcntl
import os

from nplm_tf.core.config import Config, ConfigError
from pipelines import files
from pipelines import vocabulary as vocab_lib

CONFIG = "config.json"
VOCAB = "vocab.tsv"
HISTORY = "history.json"
BEST_WEIGHTS = "best.weights.h5"
BACKUP = "backup"
BACKUP_STATE = "state.json"  # inside backup/
CHECKPOINTS = "checkpoints"
LOGS = "logs"
KERAS = "model.keras"
EXPORT = "export"
EXPORT_NETWORK = os.path.join("assets", "model")  # in an export: its network's own files, read in NumPy
MIXTURE = "mixture.json"
METRICS = "metrics.json"
NGRAM_MODEL = "ngram.npz"
ARPA = "model.arpa"
TAIL_NGRAM = "tail_ngram"
CORPUS = "corpus.json"
LOCK = ".train.lock"  # held by the process training in the directory (`TrainingLock`)


class TrainingLock:
    """Keeps a second training process out of a model directory while one trains in it.

    An advisory `flock` on MODEL_DIR/.train.lock, taken by `acquire` once the directory exists and released
    on `release`, on leaving a `with` block, or when the process ends however it ends (a kill -9 leaves no
    stale lock). A second `nplm_tf.train` (or search trial) with the same --model_dir is refused in one
    sentence before it removes a temporary file the first one is writing or trains over its backups.
    """

    def __init__(self, model_dir: str):
        self.model_dir, self._file = model_dir, None

    def acquire(self) -> None:
        """Takes the lock (again: nothing); refuses the run if another process holds it."""
        if self._file is not None:
            return
        f = open(os.path.join(self.model_dir, LOCK), "a+", encoding="utf-8")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip()
            f.close()
            raise ConfigError(
                f"{self.model_dir} is being trained by another process{f' (pid {holder})' if holder else ''}; "
                f"wait for it to end, or use another --model_dir."
            ) from None
        f.truncate(0)
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._file = f

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def __enter__(self) -> "TrainingLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class RunDir:
    """A model directory (or an n-gram one) at `path`: its files by name, read and written."""

    def __init__(self, path: str):
        self.path = path

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    # --------------------------------------------------------------- paths --
    config_path = property(lambda self: self.file(CONFIG))
    vocab_path = property(lambda self: self.file(VOCAB))
    best_weights = property(lambda self: self.file(BEST_WEIGHTS))
    backup_dir = property(lambda self: self.file(BACKUP))
    checkpoints_dir = property(lambda self: self.file(CHECKPOINTS))
    logs_dir = property(lambda self: self.file(LOGS))
    keras_file = property(lambda self: self.file(KERAS))
    export_dir = property(lambda self: self.file(EXPORT))
    ngram_model = property(lambda self: self.file(NGRAM_MODEL))
    arpa = property(lambda self: self.file(ARPA))
    tail_ngram_dir = property(lambda self: self.file(TAIL_NGRAM))

    # -------------------------------------------------------------- config --
    def has_config(self) -> bool:
        return os.path.isfile(self.config_path)

    def load_best_weights(self, model) -> None:
        """The best-by-validation weights into `model`; a file damaged since it was written is a UserError."""
        try:
            model.load_weights(self.best_weights)
        except (OSError, ValueError) as e:  # truncated (h5py's OSError) or not this model's (ValueError)
            raise ConfigError(
                f"{self.best_weights} cannot be read ({str(e).splitlines()[0]}); it was changed after it was "
                "written: restore it, or train again in a new directory."
            ) from None

    def read_config(self) -> Config:
        return Config.from_json(self.config_path)

    def write_config(self, config: Config) -> None:
        files.write_json(self.config_path, config.to_dict())

    # ---------------------------------------------------------- vocabulary --
    def has_vocab(self) -> bool:
        return os.path.isfile(self.vocab_path)

    def load_vocab(self) -> vocab_lib.Vocabulary:
        return vocab_lib.Vocabulary.load(self.vocab_path)

    def save_vocab(self, vocab: vocab_lib.Vocabulary) -> None:
        os.makedirs(self.path, exist_ok=True)  # a run's directory is made here, once its data is checked
        vocab.save(self.vocab_path)

    # ------------------------------------------------------------- history --
    def read_history(self) -> dict[int, dict]:
        """Epoch index (0-based) -> its record; {} before the first epoch ends."""
        path = self.file(HISTORY)
        return {int(k): v for k, v in files.read_json(path).items()} if os.path.isfile(path) else {}

    def write_history(self, history: dict[int, dict]) -> None:
        files.write_json(self.file(HISTORY), {str(k): v for k, v in sorted(history.items())})

    def has_finished_epoch(self) -> bool:
        """Whether any epoch was trained to its end here (its record, backup, checkpoint or best weights)."""
        saved = (self.best_weights, self.file(METRICS), os.path.join(self.backup_dir, BACKUP_STATE))
        return bool(self.read_history()) or any(map(os.path.isfile, saved)) or bool(_listing(self.checkpoints_dir))

    def save_best_weights(self, model) -> None:
        files.replace_atomically(self.best_weights, model.save_weights)

    # -------------------------------------------------------------- backup --
    def read_backup_state(self) -> list[dict] | None:
        """The backup generations, newest first ({"epoch", "weights"}), or None when there is no state file."""
        path = os.path.join(self.backup_dir, BACKUP_STATE)
        return files.read_json(path)["generations"] if os.path.isfile(path) else None

    def write_backup_state(self, generations: list[dict]) -> None:
        files.write_json(os.path.join(self.backup_dir, BACKUP_STATE), {"generations": generations})

    # ----------------------------------------------------- results, mixture --
    def read_metrics(self) -> dict | None:
        return files.read_json(self.file(METRICS)) if os.path.isfile(self.file(METRICS)) else None

    def write_metrics(self, metrics: dict) -> None:
        files.write_json(self.file(METRICS), metrics)

    def read_corpus(self) -> dict | None:
        """The corpus flags of the run (None for a run from before they were kept)."""
        return files.read_json(self.file(CORPUS)) if os.path.isfile(self.file(CORPUS)) else None

    def write_corpus(self, spec: dict) -> None:
        files.write_json(self.file(CORPUS), spec)

    def read_mixture(self) -> dict | None:
        return files.read_json(self.file(MIXTURE)) if os.path.isfile(self.file(MIXTURE)) else None

    def write_mixture(self, mixture: dict) -> None:
        files.write_json(self.file(MIXTURE), mixture)


def _listing(path: str) -> list[str]:
    return os.listdir(path) if os.path.isdir(path) else []


KINDS = {
    "model": "a network's model directory (nplm_tf.train)",
    "ngram": "an n-gram directory (nplm_tf.ngram)",
    "export": "a SavedModel export (nplm_tf.export)",
    "ensemble": "an ensemble's fit (evaluate --save_ensemble)",
}


def kind(path: str) -> str | None:
    """What `path` holds, by the files it has (no model is read): a key of `KINDS`, or None."""
    if os.path.isfile(path) and path.endswith(".json"):
        return "ensemble"
    if os.path.isfile(os.path.join(path, CONFIG)):
        return "model"
    if os.path.isfile(os.path.join(path, NGRAM_MODEL)):
        return "ngram"
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return "export"
    return None


def check_kind(path: str, flag: str, *wanted: str) -> str:
    """The kind of `path` if it is one of `wanted`, else the ConfigError that says which kind --`flag` was given
    and which it needs: binaries call it in their flag check, before any model loads."""
    found = kind(path)
    if found in wanted:
        return found
    if found is not None:
        given = KINDS[found]
    elif not os.path.exists(path):
        given = "not there"
    else:
        given = "nothing nplm_tf wrote" if os.path.isdir(path) else "a file, not a directory"
    need = " or ".join(KINDS[w] for w in wanted)
    raise ConfigError(f"--{flag}={path} is {given}; it needs {need}.")


def refuse_other_kind(path: str, flag: str, *wanted: str) -> None:
    """`check_kind` where `path` holds another kind nplm_tf writes; a path holding none is left to the reader's
    own error (which names the file it misses)."""
    if kind(path) not in (None, *wanted):
        check_kind(path, flag, *wanted)


def check_trained(model_dir: str, flag: str = "model_dir", accepted: tuple[str, ...] = ("model",)) -> RunDir:
    """The run at `model_dir` if it holds a trained model (a configuration and trained weights), else the
    ConfigError that says what is missing, or which other kind of directory --`flag` names (`accepted`: the
    kinds the binary takes there). Reads no weights and needs no TensorFlow: binaries call it in their flag
    check."""
    refuse_other_kind(model_dir, flag, *accepted)
    run = RunDir(model_dir)
    if not run.has_config():
        raise ConfigError(f"{model_dir} holds no trained model (no {CONFIG}); train one with nplm_tf.train.")
    if not os.path.isfile(run.best_weights):
        raise ConfigError(f"{model_dir} has no trained weights yet ({BEST_WEIGHTS}); train at least one epoch.")
    return run
