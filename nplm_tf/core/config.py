"""The one frozen configuration every library module of nplm_tf takes.

Binaries turn flags into a `Config`; libraries never read flags. Field comments
carry the symbol of Bengio et al. (2003) each field stands for.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from typing import Any

from nplm_tf.core import hardware
from pipelines import vocabulary
from pipelines.errors import UserError

OPTIMIZERS = ("sgd", "adam")
PRECISIONS = ("float32", "mixed_bfloat16")
TAILS = ("class", "backoff", "sigmoid", "network")  # the short list's heads (`network.heads`)
LOSSES = ("softmax", "sampled_softmax", "nce")
DEFAULT_TAIL_ORDER = 4
# Training steps per tf.function call (`training.trainer`): amortizes Keras's per-step Python cost on one
# replica. Under MirroredStrategy, Keras 3.15's multi-step loop fails ("You must feed a value for
# placeholder"), so several replicas run one step a call. Defined here, with no TensorFlow loaded, so that
# a binary can check its flags against it first.
STEPS_PER_EXECUTION = 32
# Logits one scoring batch may hold, (rows, output width) floats, of which the softmax keeps several copies at
# once: exact evaluation (`training.data.eval_batch_size`) and the SavedModel's `score` (`serving.server`). It
# bounds their memory at very large |V| for a little speed (benchmarks.zipf_corpus's vocabulary).
LOGITS_PER_BATCH = 2**27


def rows_per_batch(width: int, most: int) -> int:
    """Rows of a scoring batch over `width` outputs: `most`, fewer once `most` rows would hold more than
    `LOGITS_PER_BATCH` logits (at least 16). The probabilities do not depend on it (to float rounding); the
    memory and speed of scoring do."""
    return max(16, min(most, LOGITS_PER_BATCH // width))


# Fields that may differ when a run resumes in an existing model directory.
RESUMABLE_FIELDS = ("epochs", "patience", "min_improvement", "jit_compile")


class ConfigError(UserError):
    """A configuration value is out of range; the message says which and why."""


@dataclasses.dataclass(frozen=True)
class Config:
    """Model, data and training settings (defaults: the paper's MLP9 shape)."""

    order: int = 5  # n: the model sees the n-1 previous words
    feature_dim: int = 30  # m: features per word, C is |V| x m
    hidden_dim: int = 100  # h: tanh hidden units, H is h x (n-1)m (0 with direct: y = b + Wx)
    direct: bool = False  # W: direct connections from x to the output
    min_count: int = 4  # words seen fewer times in train map to <unk>
    max_vocab: int = 0  # |V| at most this (</s> and <unk> included): only the most frequent words kept (0: no limit)
    epochs: int = 8
    batch_size: int = 256
    optimizer: str = "adam"  # "sgd" (eps_t = eps_0 / (1 + r t)) or "adam"
    learning_rate: float = 1e-3  # eps_0
    lr_decay: float = 1e-4  # r, per step
    weight_decay: float = 1e-5  # lambda on H, U, W and the C rows in the window
    dropout: float = 0.0  # on x and tanh(d + Hx) in training; not in the paper
    average: float = 0.0  # decay a step of the weights' moving average, validated, kept and used (0: off)
    # compute dtype, softmax always float32; "auto": the faster one on this machine (`hardware.fast_precision`),
    # resolved when the config is made, so that config.json records the one chosen
    precision: str = "auto"
    jit_compile: bool = False  # XLA-compile the whole training step (speed only)
    shuffle_buffer: int = 100_000  # windows mixed before batching
    patience: int = 2  # epochs without a better valid perplexity before stopping
    # the share by which a valid perplexity must beat the best so far to count as better for `patience` (0: any
    # gain; `nplm_tf.train`'s default is 0.005, so that it stops once two epochs gain less than 0.5%)
    min_improvement: float = 0.0
    seed: int = 1234
    sync_every: int = 1  # multi-worker: 1 all-reduces gradients each step; K > 1 averages weights every K local steps
    balance_workers: bool = False  # local SGD: deal each round's batches by worker speed (not reproducible run to run)
    # Large vocabularies (docs/large_vocabularies.md): a short list, or sampled training of the full softmax.
    shortlist: int = 0  # N: the network predicts the N most frequent words (0: every word, the full softmax)
    # short list: "class" (N+1 outputs, the last "in the tail"), "backoff" (Schwenk 2007), or "network" (the class
    # tail's words scored by a second softmax of the network, computed only for tail targets in training)
    tail: str = "class"
    tail_ngram_order: int = 0  # K of the Kneser-Ney model that scores the tail (0: min(4, n))
    # the tail model's pruning thresholds, "T1,T2,..." as `nplm_tf.ngram --prune` reads them ("": unpruned)
    tail_ngram_prune: str = ""
    loss: str = "softmax"  # "softmax" (exact), "sampled_softmax" or "nce": training only; evaluation is exact
    num_sampled: int = 100  # noise words per batch for sampled_softmax / nce
    # α: the full softmax's training loss adds α·(ln Z)² per example, so that y_w itself comes near ln P
    # (self-normalization, Devlin et al. 2014; they used 0.1); 0: off. Scoring always normalizes.
    self_normalize: float = 0.0
    # C: a class-factored softmax over the whole vocabulary (Goodman 2001): words in C frequency bands,
    # P(w | C) = P(class | C) · P(w | class, C); -1: C = ⌈√|V|⌉; 0: off
    classes: int = 0

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):  # a --config_json may hold any JSON value
            kind, ok = _TYPES[field.type]
            _check(ok(getattr(self, field.name)), field.name, getattr(self, field.name), f"must be {kind}")
        _check(self.order >= 2, "order", self.order, "must be at least 2 (n-1 >= 1 context word)")
        _check(self.feature_dim > 0, "feature_dim", self.feature_dim, "must be positive")
        _check(
            self.hidden_dim > 0 or (self.hidden_dim == 0 and self.direct),
            "hidden_dim",
            self.hidden_dim,
            "must be positive, or 0 with direct connections (the paper's linear model, MLP3)",
        )
        _check(self.min_count >= 1, "min_count", self.min_count, "must be at least 1")
        _check(
            self.max_vocab == 0 or self.max_vocab >= vocabulary.MIN_SIZE,
            "max_vocab",
            self.max_vocab,
            f"must be 0 (no limit) or at least {vocabulary.MIN_SIZE} (</s>, <unk> and a word)",
        )
        _check(self.epochs >= 1, "epochs", self.epochs, "must be at least 1")
        _check(0 <= self.seed < 2**32, "seed", self.seed, "must be in [0, 2**32 - 1]")
        _check(self.batch_size >= 1, "batch_size", self.batch_size, "must be at least 1")
        _check(self.optimizer in OPTIMIZERS, "optimizer", self.optimizer, f"must be one of {OPTIMIZERS}")
        _check(self.learning_rate > 0, "learning_rate", self.learning_rate, "must be positive")
        _check(self.lr_decay >= 0, "lr_decay", self.lr_decay, "must be >= 0")
        _check(self.weight_decay >= 0, "weight_decay", self.weight_decay, "must be >= 0")
        _check(0 <= self.dropout < 1, "dropout", self.dropout, "must be in [0, 1)")
        _check(0 <= self.average < 1, "average", self.average, "must be in [0, 1) (0: no average)")
        if self.precision == "auto":
            object.__setattr__(self, "precision", hardware.fast_precision()[0])  # frozen: resolved once, here
        _check(self.precision in PRECISIONS, "precision", self.precision, f"must be one of {PRECISIONS + ('auto',)}")
        _check(self.shuffle_buffer >= 1, "shuffle_buffer", self.shuffle_buffer, "must be at least 1")
        _check(self.patience >= 1, "patience", self.patience, "must be at least 1")
        _check(0 <= self.min_improvement < 1, "min_improvement", self.min_improvement, "must be in [0, 1)")
        _check(self.sync_every >= 1, "sync_every", self.sync_every, "must be at least 1")
        _check(self.shortlist >= 0, "shortlist", self.shortlist, "must be >= 0 (0: the full softmax)")
        _check(self.tail in TAILS, "tail", self.tail, f"must be one of {TAILS}")
        _check(self.shortlist > 0 or self.tail == "class", "tail", self.tail, "needs shortlist > 0")
        _check(
            self.shortlist > 0 or self.tail_ngram_order == 0,
            "tail_ngram_order",
            self.tail_ngram_order,
            "needs shortlist > 0",
        )
        _check(
            self.tail_ngram_order == 0 or 2 <= self.tail_ngram_order <= self.order,
            "tail_ngram_order",
            self.tail_ngram_order,
            f"must be in [2, order={self.order}] (the n-gram sees the n-1 context words)",
        )
        # which tails take an n-gram's order and pruning is the head's to say (`heads.kind`)
        _tail_prune(self.tail_ngram_prune, self.tail_order)  # a bad threshold is refused before any data is read
        _check(self.loss in LOSSES, "loss", self.loss, f"must be one of {LOSSES}")
        _check(
            self.loss == "softmax" or self.shortlist == 0,
            "loss",
            self.loss,
            "trains the full vocabulary; use it with shortlist=0",
        )
        _check(self.num_sampled > 0, "num_sampled", self.num_sampled, "must be positive")
        _check(self.self_normalize >= 0, "self_normalize", self.self_normalize, "must be >= 0 (0: off)")
        _check(
            self.self_normalize == 0 or (self.shortlist == 0 and self.loss == "softmax"),
            "self_normalize",
            self.self_normalize,
            "needs the full softmax trained exactly (shortlist=0, loss=softmax); NCE self-normalizes by itself",
        )
        _check(self.classes >= -1, "classes", self.classes, "must be C ≥ 1, -1 (⌈√|V|⌉) or 0 (off)")
        _check(
            self.classes == 0 or (self.shortlist == 0 and self.loss == "softmax" and self.self_normalize == 0),
            "classes",
            self.classes,
            "is a head of its own: use it without shortlist, a sampled loss or self_normalize",
        )
        _check(
            self.loss == "softmax" or not self.jit_compile,
            "jit_compile",
            self.jit_compile,
            f"cannot compile a sampled loss (loss={self.loss!r}): its noise and rows in use have data-dependent shapes",
        )
        _check(
            not self.balance_workers or self.sync_every > 1,
            "balance_workers",
            self.balance_workers,
            "needs sync_every > 1 (it deals the batches of local SGD's rounds)",
        )

    @property
    def tail_order(self) -> int:
        """K, the order of the short list's tail n-gram."""
        return self.tail_ngram_order or min(DEFAULT_TAIL_ORDER, self.order)

    @property
    def tail_prune(self) -> tuple[int, ...]:
        """The tail n-gram's pruning thresholds, one per order 1-K (`KneserNey.prune`; all 0: unpruned)."""
        return _tail_prune(self.tail_ngram_prune, self.tail_order)

    def check_vocab_size(self, vocab_size: int) -> None:
        """The settings that depend on |V|, checked once the vocabulary is known."""
        _check(self.shortlist < vocab_size, "shortlist", self.shortlist, f"must be smaller than |V| = {vocab_size:,}")
        _check(self.classes <= vocab_size, "classes", self.classes, f"must be at most |V| = {vocab_size:,}")
        if self.loss != "softmax":
            _check(
                self.num_sampled < vocab_size,
                "num_sampled",
                self.num_sampled,
                f"must be smaller than |V| = {vocab_size:,}",
            )

    @property
    def context_size(self) -> int:
        """n - 1, the number of words the model conditions on."""
        return self.order - 1

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "Config":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown config field(s) {unknown}; known fields are {sorted(known)}.")
        return cls(**values)

    @classmethod
    def from_json(cls, path: str) -> "Config":
        try:
            with open(path, encoding="utf-8-sig") as f:  # a byte-order mark (some editors write one) is not JSON
                values = json.load(f)
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist.") from None
        except IsADirectoryError:
            raise ConfigError(f"config file {path} is a directory; give the JSON file in it.") from None
        except OSError as e:
            raise ConfigError(f"config file {path} cannot be read ({e.strerror}).") from None
        except UnicodeDecodeError:
            raise ConfigError(f"config file {path} is not UTF-8 text.") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"config file {path} is not valid JSON ({e}).") from None
        if not isinstance(values, dict):
            raise ConfigError(f"config file {path} must hold one JSON object of settings, not {type(values).__name__}.")
        return cls.from_dict(values)

    def replace(self, **changes: Any) -> "Config":
        return dataclasses.replace(self, **changes)

    def differences(self, other: "Config") -> list[str]:
        """Names of the fields that differ, other than those a resume may change."""
        mine, theirs = self.to_dict(), other.to_dict()
        return [k for k in mine if k not in RESUMABLE_FIELDS and mine[k] != theirs[k]]


# The field types (annotations are strings here), what to call each in an error, and its test; bool is an int
# to Python, so it is refused where a number is meant.
_TYPES = {
    "int": ("an integer", lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool)),
    "float": (
        "a finite number",
        lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v),
    ),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "str": ("a string", lambda v: isinstance(v, str)),
}


def prune_thresholds(values, order: int, name: str = "prune", error: type[UserError] = ConfigError) -> tuple[int, ...]:
    """`prune`'s thresholds as given (one per order from 1, the last holding for the orders after it), checked
    as lmplz checks --prune, one per order; `name` is the setting an error names."""
    given = ",".join(str(v) for v in values)
    try:
        values = [int(v) for v in values] or [0]
    except ValueError:
        raise error(f"{name}={given} must be whole counts, one per order from 1, such as 0,0,1.") from None
    if len(values) > order:
        raise error(f"{name}={given} gives {len(values)} thresholds for a {order}-gram; give at most {order}.")
    if values[0] != 0:
        raise error(f"{name}={given}: unigrams are never pruned, so the first threshold must be 0.")
    if any(b < a for a, b in zip(values, values[1:])):
        raise error(f"{name}={given}: the thresholds must not decrease from one order to the next.")
    return tuple(values + values[-1:] * (order - len(values)))


def _tail_prune(value: str, order: int) -> tuple[int, ...]:
    return prune_thresholds(value.split(","), order, name="tail_ngram_prune") if value else (0,) * order


def _check(ok: bool, name: str, value: Any, why: str) -> None:
    if not ok:
        raise ConfigError(f"{name}={value!r} {why}.")
