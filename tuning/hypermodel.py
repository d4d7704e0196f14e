"""The keras-tuner HyperModel: the NPLM over hidden size h and feature count m (and n, direct, N, ε_0)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import keras_tuner

from nplm_tf.core.config import Config
from nplm_tf.network import heads, objectives
from nplm_tf.network import model as model_lib
from nplm_tf.training import callbacks as callbacks_lib
from nplm_tf.training import trainer
from pipelines import corpus as corpus_lib

# The default search space: name -> (min, max, step, default) for integers, a
# list of choices for the others. `order` and `direct` are searched only when asked.
SEARCH_SPACE = {
    "hidden_dim": (50, 400, 50, 100),  # h
    "feature_dim": (20, 120, 10, 30),  # m
    "order": [3, 4, 5, 6],  # n, default 5
    "direct": [False, True],  # W, default False
    "shortlist": [0, 2000, 4000, 8000],  # N, default 0 (full softmax); sizes not below |V| are left out
    "learning_rate": [0.5, 1, 2, 4],  # ε_0 as multiples of the base's (Adam's 1e-3: 5e-4 to 4e-3)
}
DEFAULTS = Config()
OBJECTIVE = keras_tuner.Objective("val_perplexity", direction="min")
TRIALS_SUBDIR = "runs"


def shortlist_changes(size: int) -> dict:
    """The config changes of a searched list size: a full softmax (0) has no tail, so it drops the base's tail
    settings, which are for N > 0."""
    if size:
        return {"shortlist": size}
    return {
        "shortlist": 0,
        "tail": DEFAULTS.tail,
        "tail_ngram_order": DEFAULTS.tail_ngram_order,
        "tail_ngram_prune": DEFAULTS.tail_ngram_prune,
    }


def learning_rates(base: float) -> list[float]:
    """The searched ε_0: SEARCH_SPACE["learning_rate"]'s multiples of the base's (factor 1 the default
    trial's), rounded to 6 significant digits so that 1e-3 · 0.5 is 0.0005 as the results print it."""
    return [float(f"{base * factor:.6g}") for factor in SEARCH_SPACE["learning_rate"]]


class NPLMHyperModel(keras_tuner.HyperModel):
    """Builds the eq. (1) model for a trial's h, m (, n, direct) and trains it with the project's training loop.

    Each trial is an ordinary `nplm_tf.train` run in OUTPUT/runs/<config hash>:
    same pipeline, exact validation perplexity, resumable. A trial interrupted
    with the search resumes from its last finished epoch when the search is
    run again, and a configuration trained before is not trained again.

    Args:
      base: the settings not searched (learning rate, epochs per trial, ...).
      corpus: the corpus to train and validate on.
      vocab_size: |V| for the corpus at `base.min_count`.
      output_dir: where the trials' run directories go.
      tune_order, tune_direct: also search n and the direct connections.
      tune_shortlist: also search the short list's size N (0, the full softmax, among them); the lists use
        the base's tail, which a base of N > 0 sets (N = 0 trials ignore it).
      tune_learning_rate: also search ε_0 among SEARCH_SPACE["learning_rate"] times the base's.
      counts: the vocabulary's train counts (a sampled objective's noise).
    """

    def __init__(
        self,
        base: Config,
        corpus: corpus_lib.Corpus,
        vocab_size: int,
        output_dir: str,
        tune_order: bool = False,
        tune_direct: bool = False,
        tune_shortlist: bool = False,
        tune_learning_rate: bool = False,
        counts=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.base = base
        self.corpus = corpus
        self.vocab_size = vocab_size
        self.output_dir = output_dir
        self.tune_order = tune_order
        self.tune_direct = tune_direct
        self.tune_shortlist = tune_shortlist
        self.tune_learning_rate = tune_learning_rate
        self.counts = counts

    def config(self, hp: keras_tuner.HyperParameters) -> Config:
        low, high, step, default = SEARCH_SPACE["hidden_dim"]
        changes = {"hidden_dim": hp.Int("hidden_dim", low, high, step=step, default=default)}
        low, high, step, default = SEARCH_SPACE["feature_dim"]
        changes["feature_dim"] = hp.Int("feature_dim", low, high, step=step, default=default)
        if self.tune_order:
            changes["order"] = hp.Choice("order", SEARCH_SPACE["order"], default=5)
        if self.tune_direct:
            changes["direct"] = hp.Boolean("direct", default=False)
        if self.tune_shortlist:
            sizes = [n for n in SEARCH_SPACE["shortlist"] if n < self.vocab_size]
            changes.update(shortlist_changes(hp.Choice("shortlist", sizes, default=0)))
        if self.tune_learning_rate:
            rates = learning_rates(self.base.learning_rate)
            changes["learning_rate"] = hp.Choice(
                "learning_rate", rates, default=rates[SEARCH_SPACE["learning_rate"].index(1)]
            )
        return dataclasses.replace(self.base, **changes)

    def build(self, hp):
        config = self.config(hp)
        head = heads.make(config, self.vocab_size)  # this trial's (keras-tuner builds a model a trial)
        model = model_lib.build_model(config, head)
        return model_lib.compile_model(
            model,
            config,
            steps_per_execution=_steps_per_execution(),
            objective=objectives.of_config(config, head, self.counts),
        )

    def fit(self, hp, model, *args, callbacks=(), epochs=None, **kwargs):
        config = self.config(hp)
        if epochs is not None:  # Hyperband sets the epochs of each round
            config = dataclasses.replace(config, epochs=int(epochs))
        run = run_dir(self.output_dir, config)
        try:
            metrics = trainer.train_and_evaluate(
                config,
                run,
                self.corpus,
                model.distribute_strategy,  # the tuner's distribution_strategy
                verbose=kwargs.get("verbose", 0),
                extra_callbacks=list(callbacks),
                model=model,
                export=False,
            )
        except callbacks_lib.TrainingDiverged as e:  # a failed trial, never retried, with its reason printed
            print(f"trial {os.path.basename(run)} failed: {e}", flush=True)
            raise keras_tuner.errors.FailedTrialError(str(e)) from None
        return {
            "val_perplexity": metrics["valid_perplexity"],
            "test_perplexity": metrics["test_perplexity"],
            "seconds": metrics["train_seconds"],
            "epochs": len(metrics["epochs"]),
        }


def config_key(config: Config) -> str:
    """A short stable name for a configuration (epochs aside: a longer run continues a shorter one)."""
    values = {k: v for k, v in config.to_dict().items() if k not in ("epochs", "patience")}
    return hashlib.sha1(json.dumps(values, sort_keys=True).encode()).hexdigest()[:12]


def run_dir(output_dir: str, config: Config) -> str:
    return os.path.join(
        output_dir,
        TRIALS_SUBDIR,
        f"h{config.hidden_dim}_m{config.feature_dim}_n{config.order}"
        f"{'_direct' if config.direct else ''}_{config_key(config)}",
    )


def _steps_per_execution() -> int:
    # deferred: TensorFlow loads when this runs, not with the module
    import tensorflow as tf

    # build() runs inside the tuner's distribution_strategy scope.
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    return trainer.STEPS_PER_EXECUTION if replicas == 1 else 1
