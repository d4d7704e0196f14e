"""train_and_evaluate(config, model_dir, corpus): the whole run with Keras `fit`, resumable.

The model directory (`nplm_tf.run_dir`) holds everything a run writes.
Re-running the same command resumes from the last finished epoch with the
optimizer state.
"""

from __future__ import annotations

import sys

import keras
import numpy as np
import tensorflow as tf

from nplm_tf.config import STEPS_PER_EXECUTION, Config, ConfigError
from nplm_tf.distributed import strategies
from nplm_tf.network import model as model_lib
from nplm_tf.network import objectives, scoring
from nplm_tf.run_dir import RunDir, TrainingLock
from nplm_tf.serving import saved_model
from nplm_tf.tools import embeddings
from nplm_tf.training import backup
from nplm_tf.training import callbacks as callbacks_lib
from nplm_tf.training import tail as tail_lib
from nplm_tf.training.data import Data, prepare_data
from pipelines import corpus as corpus_lib
from pipelines import files
from pipelines import vocabulary as vocab_lib


def check_model_dir(config: Config, model_dir: str, corpus: corpus_lib.Corpus) -> None:
    """Refuses a directory that holds a model of another configuration, or trained on another corpus
    (config.json and corpus.json are written once the data is checked, by `prepare_data`'s caller). Writes
    nothing: the directory itself is made when the vocabulary is saved, once the data is checked, so a refused
    run leaves no empty directory behind."""
    files.check_output_dir("model_dir", model_dir)
    run = RunDir(model_dir)
    if run.has_config():
        saved = run.read_config()
        diff = config.differences(saved)
        if diff:
            changes = ", ".join(f"{k}: {getattr(saved, k)!r} -> {getattr(config, k)!r}" for k in diff)
            raise ConfigError(
                f"{model_dir} holds a model trained with another configuration ({changes}); "
                f"use a new --model_dir or the same flags."
            )
    kept = run.read_corpus()
    if kept is not None and corpus.spec is not None:
        # Its vocabulary, tail n-gram, history and best epoch are the kept corpus's. Where a corpus is kept as
        # text (--gcide_cache) does not change it.
        names = sorted((set(kept) | set(corpus.spec)) - {"gcide_cache"})
        changes = [
            f"{k}: {kept.get(k)!r} -> {corpus.spec.get(k)!r}" for k in names if kept.get(k) != corpus.spec.get(k)
        ]
        if changes:
            raise ConfigError(
                f"{model_dir} holds a model trained on another corpus ({', '.join(changes)}); use a new --model_dir "
                "or the same corpus flags."
            )


def set_up_run(
    config: Config,
    model_dir: str,
    corpus: corpus_lib.Corpus,
    tail_ngram_dir: str | None,
    lock: TrainingLock,
    writer: bool = True,
) -> tuple[dict | None, Data | None, tail_lib.ShortListTail | tail_lib.NetworkTail | None]:
    """The start of every run, in the order that lets a refused run write nothing: (metrics, None, None) for a
    run that already finished, else (None, data, tail).

    Every process checks the directory's configuration, the data and a new run's --ngram_dir; the `writer`
    (the one process, or a multi-worker run's chief) takes the directory's lock before it removes what a
    kill -9 left mid-write (a resumed run) or once its vocabulary has made the directory (a new run), then
    writes config.json, corpus.json and the tail; the others return tail None and load the kept one later.
    """
    check_model_dir(config, model_dir, corpus)
    tail_lib.check_kept_tail(config, model_dir, tail_ngram_dir)
    run = RunDir(model_dir)
    new_run = not run.has_config()  # a run set up before kept its tail; --ngram_dir is only compared with it
    if writer:
        if not new_run:
            lock.acquire()
        for stale in files.remove_stale_temporaries(model_dir):
            print(f"removed {stale}, a file an interrupted write left behind", flush=True)
    finished = finished_metrics(config, model_dir)
    if finished is not None:
        return finished, None, None
    # a bad --ngram_dir, or a tail pruned empty, is refused before anything is written
    new_tail = tail_lib.NewTail(config, tail_ngram_dir, corpus if writer else None)
    data = prepare_data(config, corpus, model_dir if writer else None, check=new_tail if writer or new_run else None)
    if not writer:
        return None, data, None
    lock.acquire()  # a new run's directory exists now
    run.write_config(config)
    if corpus.spec:
        run.write_corpus(corpus.spec)
    return None, data, tail_lib.prepare_tail(config, data.vocab, model_dir, new_tail)


def build_compiled_model(config: Config, vocab: vocab_lib.Vocabulary, strategy: tf.distribute.Strategy) -> keras.Model:
    with strategy.scope():
        model = model_lib.build_model(config, vocab.size)
        steps = STEPS_PER_EXECUTION if strategy.num_replicas_in_sync == 1 else 1
        objective = objectives.make_objective(config, vocab.counts)
        model_lib.compile_model(model, config, steps_per_execution=steps, objective=objective)
    return model


def init_output_bias(model: keras.Model, vocab: vocab_lib.Vocabulary, config: Config | None = None) -> None:
    """b = ln of the train unigram frequencies of the outputs: training starts from the unigram model.

    A short list's outputs are its N words and, with the class tail, the tail's total; with the back-off
    tail the list's frequencies are normalized over the list; the network tail's are the class tail's and
    then its words' frequencies normalized over the tail.
    """
    counts = np.asarray(vocab.counts, np.float64) + 1.0  # add-one: <unk> may count 0
    shortlist = config.shortlist if config is not None else 0
    head = counts
    if shortlist and config.tail in ("class", "network"):
        head = np.append(counts[:shortlist], counts[shortlist:].sum())
    elif shortlist:
        head = counts[:shortlist]
    bias = np.log(head / head.sum())
    if shortlist and config.network_tail:  # then the tail's own softmax: its words' frequencies in the tail
        tail = counts[shortlist:]
        bias = np.append(bias, np.log(tail / tail.sum()))
    model.get_layer("nplm").b.assign(bias.astype(np.float32))


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
    """
    strategies.check_local_sgd(config.sync_every, multi_worker=False)  # `multi_worker.train_multi_worker` does it
    with TrainingLock(model_dir) as lock:
        return _train_and_evaluate(
            config, model_dir, corpus, strategy, verbose, extra_callbacks, model, export, tail_ngram_dir, lock
        )


def _train_and_evaluate(
    config: Config,
    model_dir: str,
    corpus: corpus_lib.Corpus,
    strategy: tf.distribute.Strategy | None,
    verbose: int | None,
    extra_callbacks: list[keras.callbacks.Callback],
    model: keras.Model | None,
    export: bool,
    tail_ngram_dir: str | None,
    lock: TrainingLock,
) -> dict:
    finished, data, tail = set_up_run(config, model_dir, corpus, tail_ngram_dir, lock)
    if finished is not None:
        return finished
    strategy = strategy or tf.distribute.get_strategy()
    keras.utils.set_random_seed(config.seed)

    run = RunDir(model_dir)
    epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
    train_ds = data.train_dataset(corpus, config, epoch)
    valid_ds = data.dataset(corpus, "valid", config)
    if model is None:
        model = build_compiled_model(config, data.vocab, strategy)
    model_lib.attach_tail(model, tail)
    init_output_bias(model, data.vocab, config)  # a resume restores the trained b over this
    print(
        f"training {model.count_params():,} parameters on {strategy.num_replicas_in_sync} replica(s); "
        f"{data.tokens['train']:,} train tokens, |V| = {data.vocab.size:,}",
        flush=True,
    )

    if verbose is None:
        verbose = 1 if sys.stdout.isatty() else 2
    step_loss = callbacks_lib.StepLoss(run)
    callbacks = [
        callbacks_lib.Interruptible(),
        callbacks_lib.EpochSeed(epoch),
        step_loss,  # before ValidationRecorder, which keeps its curve
        callbacks_lib.ValidationRecorder(run, valid_ds, data.tokens["train"], data.vocab.unk_id, step_loss),
        callbacks_lib.ResumableEarlyStopping(run, config.patience),
        keras.callbacks.TensorBoard(run.logs_dir, write_graph=False, profile_batch=0),
        backup.EpochBackup(run),
        *extra_callbacks,
    ]
    with strategy.scope():
        initial_epoch = backup.restore_backup(model, run)
    # shuffle=False: the dataset already shuffles, as a function of the epoch.
    model.fit(
        train_ds, epochs=config.epochs, initial_epoch=initial_epoch, callbacks=callbacks, verbose=verbose, shuffle=False
    )

    return finish_run(model, data, corpus, config, model_dir, export=export)


def finished_metrics(config: Config, model_dir: str) -> dict | None:
    """The metrics of a run in `model_dir` that finished with this config and at least these epochs, else None."""
    finished = RunDir(model_dir).read_metrics()
    if finished is None:
        return None
    done = Config.from_dict(finished["config"])
    if done.differences(config) or done.epochs < config.epochs:
        return None
    print(f"{model_dir} already holds a finished run with this config; metrics unchanged.", flush=True)
    return finished


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
    metrics = evaluate_all(model, data, corpus, config)
    metrics["epochs"] = list(run.read_history().values())
    metrics["train_seconds"] = sum(e["seconds"] for e in metrics["epochs"])
    metrics["best_epoch"] = min(metrics["epochs"], key=lambda e: e["valid_perplexity"])["epoch"]
    metrics.update(extra or {})
    if write:
        files.replace_atomically(run.keras_file, model.save)
        embeddings.write_projector(run, data.vocab, embeddings.features(model))  # TensorBoard's Projector tab
        if export:
            metrics["export"] = saved_model.export(model_dir)  # a new version each time training extends the run
        run.write_metrics(metrics)
    return metrics


def evaluate_all(model: keras.Model, data: Data, corpus: corpus_lib.Corpus, config: Config) -> dict:
    batch_nll = scoring.nll_function(model)
    scores = {
        name: scoring.score(model, data.dataset(corpus, name, config), data.vocab.unk_id, batch_nll=batch_nll)
        for name in ("valid", "test")
    }
    metrics = {
        "corpus": corpus.name,
        "vocab_size": data.vocab.size,
        "tokens": dict(data.tokens),
        "valid_perplexity": scores["valid"].perplexity,
        "test_perplexity": scores["test"].perplexity,
        "oov_rate": {name: s.oov_rate for name, s in scores.items()},
        "config": config.to_dict(),
    }
    if config.loss != "softmax":  # how far a sampled objective left the model from normalizing itself
        metrics["valid_log_normalizer"] = scoring.log_normalizer(model, data.dataset(corpus, "valid", config))
    return metrics
