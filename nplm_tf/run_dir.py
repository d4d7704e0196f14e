"""What a training run's directory holds, and loading the trained model back from it."""

from __future__ import annotations

import json
import os

import keras

from nplm_tf import callbacks as callbacks_lib
from nplm_tf import model as model_lib
from nplm_tf.config import Config, ConfigError
from pipelines import vocabulary as vocab_lib

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.json"
KERAS_FILE = "model.keras"


def load_trained(model_dir: str) -> tuple[Config, vocab_lib.Vocabulary, keras.Model]:
    """The config, vocabulary and best-by-validation model of a training run."""
    if not os.path.isfile(os.path.join(model_dir, CONFIG_FILE)):
        raise ConfigError(f"{model_dir} holds no trained model (no {CONFIG_FILE}); train one with nplm_tf.train.")
    config = Config.from_json(os.path.join(model_dir, CONFIG_FILE))
    vocab = vocab_lib.Vocabulary.load(model_dir)
    weights = os.path.join(model_dir, callbacks_lib.BEST_WEIGHTS)
    if not os.path.isfile(weights):
        raise ConfigError(f"{model_dir} has no trained weights yet ({callbacks_lib.BEST_WEIGHTS}); train at least one epoch.")
    model = model_lib.build_model(config, vocab.size)
    model.load_weights(weights)
    return config, vocab, model


def read_metrics(model_dir: str) -> dict | None:
    path = os.path.join(model_dir, METRICS_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)
