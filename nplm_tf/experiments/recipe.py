"""The recipe of `nplm_tf.reproduce --best` that its flags read before anything trains: its configuration for
a corpus and the time budget. No TensorFlow: a bad corpus or budget is refused in one sentence, before it loads.
"""

from __future__ import annotations

import os

from nplm_tf.core.config import Config
from nplm_tf.training import run_setup
from pipelines import corpus as corpus_lib
from pipelines.errors import UserError

CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "brown_best.json")


def recipe(corpus: corpus_lib.Corpus) -> tuple[Config, str | None]:
    """The recipe's configuration for `corpus` (`CONFIG`), with the head `train` gives a new run on it
    (`run_setup.head_for_vocabulary`: from 20,000 words a short list, whose epoch costs a fraction of the full
    softmax's there), and the sentence that says so, or None."""
    return run_setup.head_for_vocabulary(Config.from_json(CONFIG), corpus)


def budget_seconds(text: str | None) -> float | None:
    """--budget in seconds: a positive number and a unit, h, m, min or s (2h, 90m, 1.5h), or None."""
    if text is None:
        return None
    units = {"h": 3600.0, "m": 60.0, "min": 60.0, "s": 1.0}
    number = text.strip().rstrip("hmins")
    unit = text.strip()[len(number) :]
    try:
        seconds = float(number) * units[unit]
    except (KeyError, ValueError):
        seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        raise UserError(f"--budget={text} must be a positive time with its unit: 2h, 90m or 600s.")
    return seconds
