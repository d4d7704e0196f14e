"""Output heads: one owner for each output distribution, and the factory that picks one from a config.

| `--tail` (with `--shortlist=N`) | head | outputs |
|---|---|---|
| (no short list) | `softmax.FullSoftmax` | \\|V\\| |
| `class` | `ngram_tail.ClassTail` | N + 1 |
| `backoff` | `ngram_tail.BackoffTail` | N |
| `sigmoid` | `sigmoid.SigmoidTail` | N + 1 |
| `network` | `network_tail.NetworkTail` | \\|V\\| + 1 |
| `--classes=C` (no short list) | `classes.ClassSoftmax` | C + \\|V\\| |

The interface is `base.Head`. This module is the only place that reads `config.tail` and `config.classes` (`objectives.of_config`, `config.loss`);
it imports no TensorFlow (the NumPy inference path uses the heads too).
"""

from __future__ import annotations

import importlib

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


def make(config, vocab_size: int, ngram=None) -> Head:
    """The head of `config` over |V| = `vocab_size` words; `ngram`: the Kneser-Ney model of an n-gram tail
    (`needs_ngram`), needed to score with it, not to train."""
    return head_class(name_of(config)).from_config(config, vocab_size, ngram)


def needs_ngram(config) -> bool:
    """Whether a config's head scores its tail with a Kneser-Ney n-gram."""
    return head_class(name_of(config)).needs_ngram


def output_rows(config) -> bool:
    """Whether the output weights are stored a row per output: training reads some rows only (the sampled
    losses, a head that trains on part of its outputs)."""
    return sampled(config) or head_class(name_of(config)).output_rows


def sampled(config) -> bool:
    """Whether training estimates the full softmax's loss by sampling (`--loss`); it is always scored exactly."""
    return config.loss != "softmax"


def lazy_updates(config) -> bool:
    """Whether Adam updates only the rows a batch uses (`optimizers.FusedAdam`'s `lazy`): the sampled losses,
    and the heads that say so (`Head.lazy_updates`)."""
    return sampled(config) or head_class(name_of(config)).lazy_updates
