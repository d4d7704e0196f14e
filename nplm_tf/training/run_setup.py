"""The start of a training run, up to the first thing that needs TensorFlow: the model directory's config
and corpus checked, the data checked and its vocabulary built, a short list's tail n-gram built and kept.

`nplm_tf.train` runs it before TensorFlow loads (several seconds), so that a bad file, a vocabulary-dependent
flag or a directory of another run is refused at once; `trainer.train_and_evaluate` runs it for other callers.
"""

from __future__ import annotations

from nplm_tf.core.config import Config, ConfigError
from nplm_tf.core.run_dir import RunDir, TrainingLock
from nplm_tf.network import heads
from nplm_tf.training import tail as tail_lib
from nplm_tf.training.data import LARGE_VOCABULARY, Data, large_vocabulary_note, prepare_data
from pipelines import corpus as corpus_lib
from pipelines import files
from pipelines import vocabulary as vocab_lib

# `nplm_tf.train`'s short list for a new run on a large vocabulary that chose no head (benchmarks/README.md,
# "Defaults beyond Brown": on GCIDE it trains several times faster than the full softmax at the same shape).
LARGE_VOCABULARY_SHORTLIST = 4000


def head_for_vocabulary(config: Config, corpus: corpus_lib.Corpus) -> tuple[Config, str | None]:
    """`nplm_tf.train`'s output layer by the corpus's size, for a new run whose flags chose none: from
    `LARGE_VOCABULARY` words (|V| of train at the config's --min_count and --max_vocab) a short list of the
    `LARGE_VOCABULARY_SHORTLIST` most frequent with the class tail, whose output layer costs O(h·N) a token, not
    O(h·|V|); below it the full softmax. Returns the config and the sentence that says what was chosen."""
    for name in corpus_lib.SPLITS:  # refused as `prepare_vocabulary` refuses them, before the count
        corpus_lib.check_split(corpus[name], config.order)
    vocab_size = vocab_lib.build(corpus["train"], config.min_count, config.max_vocab).size
    if vocab_size < LARGE_VOCABULARY:
        return config, None
    config = config.replace(shortlist=LARGE_VOCABULARY_SHORTLIST, tail="class")
    return config, (
        f"|V| = {vocab_size:,}: a short list of the {LARGE_VOCABULARY_SHORTLIST:,} most frequent words, the rest "
        "scored by a Kneser-Ney tail (--shortlist=0 keeps the full softmax)."
    )


def _other_run(model_dir: str, what: str, changes: str, same: str) -> ConfigError:
    """The refusal of a directory set up for another run; one stopped before its first epoch ended (a crash,
    Ctrl-C) holds no model, and the sentence says so: it can go."""
    if RunDir(model_dir).has_finished_epoch():
        return ConfigError(f"{model_dir} holds a model trained {what} ({changes}); use a new --model_dir or {same}.")
    return ConfigError(
        f"{model_dir} was set up for a run {what} ({changes}) that finished no epoch; remove it, use a new "
        f"--model_dir, or give {same}."
    )


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
            raise _other_run(model_dir, "with another configuration", changes, "the same flags")
    kept = run.read_corpus()
    if kept is not None and corpus.spec is not None:
        # Its vocabulary, tail n-gram, history and best epoch are the kept corpus's. Where a corpus is kept as
        # text (--gcide_cache) does not change it.
        names = sorted((set(kept) | set(corpus.spec)) - {"gcide_cache"})
        changes = [
            f"{k}: {kept.get(k)!r} -> {corpus.spec.get(k)!r}" for k in names if kept.get(k) != corpus.spec.get(k)
        ]
        if changes:
            raise _other_run(model_dir, "on another corpus", ", ".join(changes), "the same corpus flags")


def set_up_run(
    config: Config,
    model_dir: str,
    corpus: corpus_lib.Corpus,
    tail_ngram_dir: str | None,
    lock: TrainingLock,
    writer: bool = True,
) -> tuple[dict | None, Data | None, heads.Head | None]:
    """The start of every run, in the order that lets a refused run write nothing: (metrics, None, None) for a
    run that already finished, else (None, data, the run's output head): the one head (`heads.make`) the
    model, optimizer, data and loops of the run are given, with its tail n-gram where it has one (not in a
    process that is not the `writer`, which attaches the kept one later: `Head.attach_ngram`).

    Every process checks the directory's configuration, the data and a new run's --ngram_dir; the `writer`
    (the one process, or a multi-worker run's chief) takes the directory's lock before it removes what a
    kill -9 left mid-write (a resumed run) or once its vocabulary has made the directory (a new run), then
    writes config.json, corpus.json and the tail's n-gram; the others return None for it and load the kept one
    later. Nothing here loads TensorFlow: `nplm_tf.train` refuses bad data in a second, before it loads.
    """
    kind = heads.kind(config)
    check_model_dir(config, model_dir, corpus)
    tail_lib.check_kept_tail(kind, model_dir, tail_ngram_dir)
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
    new_tail = tail_lib.NewTail(config, kind, tail_ngram_dir, corpus if writer else None)
    data = prepare_data(config, corpus, model_dir if writer else None, check=new_tail if writer or new_run else None)
    head = heads.make(config, data.vocab.size)
    if not writer:
        return None, data, head
    note = large_vocabulary_note(head) if new_run else None
    if note:
        print(note, flush=True)
    lock.acquire()  # a new run's directory exists now
    run.write_config(config)
    if corpus.spec:
        run.write_corpus(corpus.spec)
    head.attach_ngram(tail_lib.keep_tail(config, data.vocab, model_dir, new_tail))
    return None, data, head


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
