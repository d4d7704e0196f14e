"""The model flags that scoring binaries share (`query`, `rescore`, `evaluate`, `export`, `runs`): --precision,
--mixture, which directories --model_dir and --ngram_dir name, and the model directories a glob matches; each
checked before any model loads."""

from __future__ import annotations

import glob
import os

from absl import flags

from nplm_tf.core.config import PRECISIONS, ConfigError
from nplm_tf.core.run_dir import RunDir, check_kind, check_trained, kind, refuse_other_kind
from pipelines.corpus import split_patterns


def precision_flag(what: str):
    """Defines a binary's --precision, which `load_trained` takes: `what` ("Serve", "Score", ...) the run's
    weights in another precision than it trained in."""
    return flags.DEFINE_enum(
        "precision",
        None,
        list(PRECISIONS),
        f"{what} in this precision instead of float32, which every path scores in whatever trained the model "
        "(the same weights).",
    )


def numpy_scoring_flags():
    """`query`'s and `rescore`'s --mixture and --precision: a saved mixture served by default, and the network
    in NumPy (`LineScorer`) unless a precision asks for TensorFlow's path."""
    mixture = flags.DEFINE_boolean(
        "mixture", True, "Without --ngram_dir: score with the mixture MODEL_DIR/mixture.json keeps, when it has one."
    )
    precision = flags.DEFINE_enum(
        "precision",
        None,
        list(PRECISIONS),
        "Score with TensorFlow in this precision (default: NumPy in float32, without TensorFlow: the same weights).",
    )
    return mixture, precision


def scoring_models(model_dir: str | None, ngram_dir: str | None, ngram_only: bool = False, precision=None):
    """What `query` and `rescore` score with, checked before any model loads: (the network's model directory or
    None, the n-gram directory or None, the `LineScorer` mode). --model_dir may name a network or an n-gram
    directory; an n-gram directory alone (either flag) is scored as KenLM's `query` scores its file, and takes
    no --precision. A network without --ngram_dir comes back as "network" (`lines.line_scorer` then serves its
    saved mixture, if any)."""
    models = _scoring_models(model_dir, ngram_dir, ngram_only)
    if models[0] is None and precision is not None:
        raise ConfigError("--precision is the network's; an n-gram alone is scored in float64 without it.")
    return models


def _scoring_models(model_dir: str | None, ngram_dir: str | None, ngram_only: bool):
    if not model_dir and not ngram_dir:
        raise ConfigError("give --model_dir (a network's or an n-gram directory) or --ngram_dir (an n-gram alone).")
    if ngram_dir:
        (refuse_other_kind if model_dir else check_kind)(ngram_dir, "ngram_dir", "ngram")
    if model_dir and kind(model_dir) == "ngram":
        if ngram_dir:
            raise ConfigError(
                f"--model_dir={model_dir} is an n-gram directory, and so is --ngram_dir: give the network as "
                "--model_dir, or one n-gram alone."
            )
        return None, model_dir, "ngram"
    if not model_dir:
        return None, ngram_dir, "ngram"
    check_trained(model_dir, "model_dir", ("model", "ngram"))
    if ngram_only and not ngram_dir:
        raise ConfigError("--ngram_only needs --ngram_dir (or give the n-gram directory as --model_dir).")
    return model_dir, ngram_dir, "ngram" if ngram_only else "mixture" if ngram_dir else "network"


def match_model_dirs(patterns: str, flag: str = "model_dirs") -> tuple[list[str], list[str]]:
    """(model directories, other directories) the comma-separated globs match, each once, in order; one
    sentence when a pattern matches nothing."""
    runs, others, seen = [], [], set()
    parts = split_patterns(patterns)
    if not parts:
        raise ConfigError(f"--{flag} is empty; give a model directory or a glob such as 'runs/*'.")
    for part in parts:
        matches = [m for m in (sorted(glob.glob(part)) if glob.has_magic(part) else [part]) if os.path.isdir(m)]
        if not matches:
            raise ConfigError(f"--{flag}: no directory matches {part!r}.")
        for path in matches:
            real = os.path.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            (runs if RunDir(path).has_config() else others).append(path)
    if not runs:
        raise ConfigError(
            f"--{flag}={patterns} matches no model directory (one holding config.json, written by nplm_tf.train)."
        )
    return runs, others
