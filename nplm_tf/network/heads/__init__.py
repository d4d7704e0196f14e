"""Output heads: one owner for each output distribution, and the factory that picks one from a config.

| `--tail` (with `--shortlist=N`) | head | outputs |
|---|---|---|
| (no short list) | `softmax.FullSoftmax` | \\|V\\| |
| `class` | `ngram_tail.ClassTail` | N + 1 |
| `backoff` | `ngram_tail.BackoffTail` | N |
| `sigmoid` | `sigmoid.SigmoidTail` | N + 1 |
| `network` | `network_tail.NetworkTail` | \\|V\\| + 1 |
| `--classes=C` (no short list) | `classes.ClassSoftmax` | C + \\|V\\| |

The interface is `base.Head`. This module is the only place that reads `config.tail` and `config.classes`
(`Head.from_config`, `config.loss`); it imports no TensorFlow (the NumPy inference path uses the heads too).
"""

from __future__ import annotations

import importlib

from nplm_tf.core.config import ConfigError
from nplm_tf.network.heads.base import Head, Outputs  # noqa: F401  (the interface)

# name -> (module, class); a new head is one file and one line here (and `config.TAILS`).
_HEADS = {
    "softmax": ("softmax", "FullSoftmax"),
    "class": ("ngram_tail", "ClassTail"),
    "backoff": ("ngram_tail", "BackoffTail"),
    "sigmoid": ("sigmoid", "SigmoidTail"),
    "network": ("network_tail", "NetworkTail"),
    "classes": ("classes", "ClassSoftmax"),
}


def head_class(name: str) -> type[Head]:
    if name not in _HEADS:
        raise ValueError(f"no output head {name!r}; the heads are {sorted(_HEADS)}.")
    module, cls = _HEADS[name]
    return getattr(importlib.import_module(f"nplm_tf.network.heads.{module}"), cls)


def name_of(config) -> str:
    """The head of a config: the full softmax, the word classes', or the short list's tail."""
    if config.classes:
        return "classes"
    return config.tail if config.shortlist else "softmax"


def named(name: str, list_size: int, vocab_size: int, ngram=None) -> Head:
    return head_class(name)(list_size, vocab_size, ngram)


def kind(config) -> type[Head]:
    """The head class of a config, with the options only some heads take checked against it (the n-gram
    tail's order and pruning): what a binary checks before it reads data, and `make` builds."""
    cls = head_class(name_of(config))
    if not cls.needs_ngram:
        with_ngram = ngram_tails()
        if config.tail_ngram_order:
            raise ConfigError(
                f"tail_ngram_order={config.tail_ngram_order!r} needs an n-gram tail (tail in {with_ngram}); "
                f"tail={config.tail!r} has none."
            )
        if config.tail_ngram_prune:
            raise ConfigError(
                f"tail_ngram_prune={config.tail_ngram_prune!r} needs a short list with an n-gram tail "
                f"(shortlist > 0, tail in {with_ngram})."
            )
    return cls


def make(config, vocab_size: int, ngram=None) -> Head:
    """The head of `config` over |V| = `vocab_size` words, built once where a run is set up or a trained
    model is loaded, and handed to everything that trains or scores with it (`Head.sampled`,
    `Head.stores_rows`, `Head.updates_lazily` say what the model, data and optimizer need to know).
    `ngram`: the Kneser-Ney model of an n-gram tail (`Head.needs_ngram`), needed to score with it, not to
    train; `Head.attach_ngram` gives it later."""
    head = kind(config).from_config(config, vocab_size, ngram)
    head.sampled = config.loss != "softmax"  # the config allows it with the full softmax only
    return head


def ngram_tails() -> tuple[str, ...]:
    """The short list's tails that a Kneser-Ney n-gram scores."""
    return tuple(name for name in _HEADS if head_class(name).needs_ngram)
