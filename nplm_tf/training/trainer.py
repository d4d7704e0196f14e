"""train_and_evaluate(config, model_dir, corpus): the whole run with Keras `fit` (the epochs' callbacks and the
resume: `training.loop`), resumable.

The model directory (`nplm_tf.core.run_dir`) holds everything a run writes.
Re-running the same command resumes from the last finished epoch with the
optimizer state.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from nplm_tf.baselines import network_mixture
from nplm_tf.core.config import STEPS_PER_EXECUTION, Config
from nplm_tf.core.run_dir import RunDir, TrainingLock
from nplm_tf.inference import embeddings
from nplm_tf.network import heads, loading, objectives, scoring
from nplm_tf.network import model as model_lib
from nplm_tf.serving import saved_model
from nplm_tf.training import loop, run_setup, strategies
from nplm_tf.training.data import Data
from pipelines import corpus as corpus_lib
from pipelines import files
from pipelines import vocabulary as vocab_lib
from pipelines.errors import UserError


def build_compiled_model(
    config: Config, counts, strategy: tf.distribute.Strategy | None, head: heads.Head
) -> keras.Model:
    """The model of `head` (the run's) compiled to train its objective (`counts`: the vocabulary's train counts,
    which a sampled objective's noise reads), its variables in `strategy`'s scope (None: this process's own,
    as a local-SGD worker's). Every loop builds its model here."""
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        model = model_lib.build_model(config, head)
        steps = STEPS_PER_EXECUTION if strategy is None or strategy.num_replicas_in_sync == 1 else 1
        objective = objectives.of_config(config, head, counts)
        model_lib.compile_model(model, config, steps_per_execution=steps, objective=objective)
    return model


def init_output_bias(model: keras.Model, vocab: vocab_lib.Vocabulary) -> None:
    """b = ln of the train unigram frequencies of the outputs (`Head.initial_bias`): training starts from the
    unigram model."""
    model.get_layer("nplm").b.assign(model.head.initial_bias(vocab.counts))


def train_and_evaluate(
    config: Config,
    model_dir: str,
    corpus: corpus_lib.Corpus,
    strategy: tf.distribute.Strategy | None = None,
    verbose: int | None = None,
    extra_callbacks: list[keras.callbacks.Callback] = (),
    model: keras.Model | None = None,
    export: bool = True,
    tail_ngram_dir: str | None = None,
    set_up: tuple | None = None,
) -> dict:
    """Trains (or resumes), restores the best weights and writes metrics.json.

    A directory whose run already finished with this config (and at least
    these epochs) is left as it is and its metrics are returned; a larger
    --epochs continues it. Another process training in `model_dir` at the
    same time is refused (`run_dir.TrainingLock`).

    Args:
      model: a compiled model for this config, built in `strategy`'s scope
        (keras-tuner builds its own); by default one is built here.
      export: also write the SavedModel (model_dir/export/<version>).
      tail_ngram_dir: with a short list, the Kneser-Ney model of its tail (default: built on train).
      set_up: `run_setup.set_up_run`'s result for this run, made by the caller, which holds the directory's
        lock until this returns (`nplm_tf.train`, before TensorFlow loads); by default the run is set up here.
    """
    strategies.check_local_sgd(config.sync_every, multi_worker=False)  # `multi_worker.train_multi_worker` does it
    if strategy is not None:  # before anything is set up or built: Keras's fit needs equal replica batches
        strategies.check_batch_split(config.batch_size, strategy.num_replicas_in_sync)
    if set_up is not None:
        return _train_and_evaluate(config, model_dir, corpus, strategy, verbose, extra_callbacks, model, export, set_up)
    with TrainingLock(model_dir) as lock:
        set_up = run_setup.set_up_run(config, model_dir, corpus, tail_ngram_dir, lock)
        return _train_and_evaluate(config, model_dir, corpus, strategy, verbose, extra_callbacks, model, export, set_up)


def _train_and_evaluate(
    config: Config,
    model_dir: str,
    corpus: corpus_lib.Corpus,
    strategy: tf.distribute.Strategy | None,
    verbose: int | None,
    extra_callbacks: list[keras.callbacks.Callback],
    model: keras.Model | None,
    export: bool,
    set_up: tuple,
) -> dict:
    finished, data, head = set_up
    if finished is not None:
        return finished
    strategy = strategy or tf.distribute.get_strategy()
    keras.utils.set_random_seed(config.seed)

    run = RunDir(model_dir)
    epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
    train_ds = data.train_dataset(corpus, config, epoch)
    valid_ds = data.dataset(corpus, "valid", config, head)
    if model is None:
        model = build_compiled_model(config, data.vocab.counts, strategy, head)
    model.head = head  # a model built by the caller (keras-tuner) scores with the run's tail n-gram
    init_output_bias(model, data.vocab)  # a resume restores the trained b over this
    loop.print_start(model, strategy.num_replicas_in_sync, data)

    if verbose is None:
        verbose = 1 if sys.stdout.isatty() else 2
    # One line an epoch: Keras's progress bar on a terminal (the logs give it the tokens/s), else ours alone.
    announce, verbose = verbose != 1, 1 if verbose == 1 else 0
    callbacks = loop.callbacks(run, config, data, valid_ds, epoch=epoch, announce=announce, extra=extra_callbacks)
    with strategy.scope():
        initial_epoch = loop.resume(model, run, config)
    if initial_epoch < config.epochs:
        # shuffle=False: the dataset already shuffles, as a function of the epoch.
        model.fit(
            train_ds,
            epochs=config.epochs,
            initial_epoch=initial_epoch,
            callbacks=callbacks,
            verbose=verbose,
            shuffle=False,
        )

    return finish_run(model, data, corpus, config, model_dir, export=export)


PHASE_SECONDS = 3.0  # a step after training that takes longer is said, with its time


@contextlib.contextmanager
def phase(what: str):
    """Times a step of the run's end and, when it took `PHASE_SECONDS` or more, says so in one line (the time
    between the last epoch and the results would otherwise go unexplained)."""
    start = time.perf_counter()
    yield
    seconds = time.perf_counter() - start
    if seconds >= PHASE_SECONDS:
        print(f"{what}: {seconds:.0f} s", flush=True)


def finish_run(
    model: keras.Model,
    data: Data,
    corpus: corpus_lib.Corpus,
    config: Config,
    model_dir: str,
    *,
    export: bool = True,
    write: bool = True,
    extra: dict | None = None,
) -> dict:
    """The end of every run: the best weights back, exact valid/test perplexity, then (if `write`)
    model.keras, the SavedModel and, last, metrics.json. Returns the metrics."""
    run = RunDir(model_dir)
    run.load_best_weights(model)
    mixed = write and run.read_mixture()  # fitted by evaluate --ngram_dir to the network as it was
    probs = {} if mixed else None
    with phase("exact valid and test perplexity" + (" and ln Z" if reports_log_z(model.head) else "")):
        # In float32 whatever the run trained in, as every other path scores (`loading.load_trained`).
        if config.precision == loading.SCORING_PRECISION:
            scorer = model
        else:
            scorer = loading.load_trained(model_dir, head=model.head)[2]
        metrics = evaluate_all(scorer, data, corpus, config, probs)
    metrics["epochs"] = list(run.read_history().values())
    metrics["train_seconds"] = sum(e["seconds"] for e in metrics["epochs"])
    metrics["best_epoch"] = min(metrics["epochs"], key=lambda e: e["valid_perplexity"])["epoch"]
    metrics.update(extra or {})
    if write:
        with phase("model.keras and the Projector's files"):
            files.replace_atomically(run.keras_file, model.save)
            embeddings.write_projector(run, data.vocab, embeddings.features(model))  # TensorBoard's Projector tab
        refitted = refit_mixture(mixed["ngram_dir"], probs, data.vocab, corpus, model_dir) if mixed else None
        if refitted:
            metrics["mixture"] = refitted[0]
        if export:
            # A new version each time training extends the run; a mixture it cannot serve (an n-gram since
            # removed or rebuilt on another vocabulary) is left out, not an error: said once, by the refit.
            mixture = None if not mixed or refitted else False
            ngram = refitted[1] if refitted else None  # not read and checked again
            with phase("the SavedModel"):
                metrics["export"] = saved_model.export(model_dir, mixture=mixture, ngram=ngram)
        run.write_metrics(metrics)
    return metrics


def refit_mixture(
    ngram_dir: str, probs: dict, vocab: vocab_lib.Vocabulary, corpus, model_dir: str
) -> tuple[dict, object] | None:
    """The mixture of mixture.json fitted again, on valid, to the network trained now (`probs`: P per token of
    valid and test), so that the next export serves weights that fit it: its report and the n-gram model;
    None, with a note, when its n-gram can no longer be read (mixture.json is then left as it was)."""
    try:
        if not os.path.isdir(ngram_dir):
            raise UserError(f"its n-gram model {ngram_dir} no longer exists")
        splits = {name: corpus[name] for name in probs}
        ngram = network_mixture.load_checked(vocab, ngram_dir)
        report = network_mixture.fit_and_score(probs, splits, vocab, ngram, ngram_dir, "test")
        network_mixture.save_fit(model_dir, report)  # training's own refit: the run's mixture stays its own
    except UserError as e:
        print(
            f"note: the mixture of mixture.json was not fitted to the network trained now (nor exported): {e}",
            flush=True,
        )
        return None
    print(
        f"fitted the mixture with {ngram_dir} (mixture.json) to the network trained now: test perplexity "
        f"{report['context_frequency']['perplexity']:.2f} with a weight per context frequency",
        flush=True,
    )
    return report, ngram


def reports_log_z(head: heads.Head) -> bool:
    """Whether the model's outputs are one softmax over the vocabulary (the full softmax, however trained), so
    that ln Z = ln Σ_w exp(y_w) says how near its raw outputs are to log-probabilities; a short list's or the
    class-factored head's outputs are normalized otherwise."""
    return head.name == "softmax"


def evaluate_all(
    model: keras.Model, data: Data, corpus: corpus_lib.Corpus, config: Config, probs: dict | None = None
) -> dict:
    """Exact valid and test perplexity (and more) of `model`; `probs`: filled with each split's P per token."""
    batch_nll = scoring.nll_function(model)
    scores, log_z = {}, []
    full_softmax = reports_log_z(model.head)  # how near its raw outputs are to ln P: ln Z on valid, in the same pass
    if full_softmax:
        fused = scoring.nll_and_log_z_function(model)

        def valid_nll(context, target):
            nll, z = fused(context, target)
            log_z.append(z.numpy())
            return nll

    for name in ("valid", "test"):
        parts = []
        on_batch = (lambda targets, nll, parts=parts: parts.append(nll)) if probs is not None else None
        function = valid_nll if full_softmax and name == "valid" else batch_nll
        scores[name] = scoring.score(
            model,
            data.dataset(corpus, name, config, model.head),
            data.vocab.unk_id,
            on_batch=on_batch,
            batch_nll=function,
        )
        if probs is not None:
            probs[name] = np.exp(-np.concatenate(parts))
    metrics = {
        "corpus": corpus.name,
        "vocab_size": data.vocab.size,
        "tokens": dict(data.tokens),
        "valid_perplexity": scores["valid"].perplexity,
        "test_perplexity": scores["test"].perplexity,
        "oov_rate": {name: s.oov_rate for name, s in scores.items()},
        "config": config.to_dict(),
    }
    if log_z:
        values = np.concatenate(log_z)
        metrics["valid_log_normalizer"] = {"mean": float(values.mean()), "std": float(values.std())}
    return metrics
