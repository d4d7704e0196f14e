"""Mixture weights fitted by a reading tool, kept between calls outside the model directory.

`query`, `rescore` and `LanguageModel` mix a network with an n-gram by weights fitted on the model's valid
split. A model directory that keeps none (`evaluate --save_mixture` writes one) used to be fitted again on
every call: seconds to tens of seconds for a one-line query. Reading tools write nothing into a model
directory, so the fit is kept in the user's cache instead:

    $NPLM_TF_CACHE, else $XDG_CACHE_HOME/nplm_tf, else ~/.cache/nplm_tf;  one file mixtures/<key>.json

The key is a digest of both models' contents (the network's configuration, vocabulary and weights; the
n-gram's `build.digest`), so a retrained network or a rebuilt n-gram is never served a stale fit, and a
copy of either finds its fit. A cache that cannot be written is skipped: the fit is then made on each call,
as before. Deleting the folder is always safe.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

from nplm_tf.core import run_dir
from pipelines import files

FORMAT = 1  # bumped when what a fit means changes: older files are then not read


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("NPLM_TF_CACHE") or os.path.join(base, "nplm_tf")


def network_digest(model_dir: str) -> str:
    """A digest of what the network computes: its configuration, vocabulary and best weights, byte for byte."""
    run = run_dir.RunDir(model_dir)
    h = hashlib.sha1(usedforsecurity=False)
    for path in (run.file(run_dir.CONFIG), run.file(run_dir.VOCAB), run.best_weights):
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()


def path_for(model_dir: str, ngram_digest: str) -> str:
    key = hashlib.sha1(f"{FORMAT}:{network_digest(model_dir)}:{ngram_digest}".encode(), usedforsecurity=False)
    return os.path.join(cache_dir(), "mixtures", key.hexdigest() + ".json")


def read(path: str) -> np.ndarray | None:
    """The weights per context frequency kept at `path`, or None (none kept, or unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            return np.asarray(json.load(f)["context_frequency"], np.float64)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write(path: str, weights, model_dir: str, ngram_dir: str) -> bool:
    """Keeps `weights` at `path`; False when the cache cannot be written (nothing else happens then)."""
    record = {
        "context_frequency": [float(w) for w in weights],
        "model_dir": os.path.abspath(model_dir),
        "ngram_dir": os.path.abspath(ngram_dir),
    }
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        files.write_json(path, record)
    except OSError:
        return False
    return True
