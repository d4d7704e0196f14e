"""The flags of `nplm_tf.evaluate` and their checks: `define` defines them on behalf of the
binary (whose --help lists them), and the checks read them once parsed. Imported by the binary only.
"""

from __future__ import annotations

import os

from absl import flags

from nplm_tf.baselines import cache, network_mixture
from nplm_tf.core import run_dir
from nplm_tf.tools import ensemble, model_flags
from pipelines import app, corpus_flags, files, tables
from pipelines import corpus as corpus_lib
from pipelines.errors import UserError

flags.disclaim_key_flags()  # `define` defines the flags for its caller, the binary
FLAGS = flags.FLAGS


def define() -> None:
    """Defines `nplm_tf.evaluate`'s flags on behalf of the binary that calls it."""
    app.define_path("model_dir", None, "A directory written by nplm_tf.train.")
    flags.DEFINE_string(
        "model_dirs", None, "Instead of --model_dir: an ensemble's networks, comma-separated directories or globs."
    )
    app.define_path("save_ensemble", None, "With --model_dirs: keep the fitted weights in this JSON file.")
    flags.DEFINE_list(
        "cache",
        [],
        "With --model_dirs: also mix in a cache of the words of the document so far, one for each decay given "
        "(comma-separated, each in (0, 1]; 1: no decay), e.g. 0.999. A document: a Brown text, or the lines between "
        "blank lines of a file (or a file); a text with no blank line gets the last --cache_window words.",
    )
    flags.DEFINE_integer(
        "cache_window", 500, "With --cache, where the text marks no documents: the words the cache keeps, across lines."
    )
    app.define_path(
        "nplm_model", None, "Instead of --model_dir: a model file of the nplm toolkit (num_hidden 0, tanh) to score."
    )
    flags.DEFINE_enum(
        "split",
        "test",
        ["train", "valid", "test"],
        "Which split to score, of the corpus the model was trained on (or of the corpus flags given).",
    )
    flags.DEFINE_string("files", None, "Score these UTF-8 files (glob(s), comma-separated) instead of --corpus.")
    app.define_path(
        "ngram_dir", None, "An nplm_tf.ngram output: also report the network mixed with it (weights fitted on valid)."
    )
    app.define_path(
        "per_token",
        None,
        "Write token<TAB>ln_prob<TAB>log10_prob per predicted token here: the network's probabilities, with "
        "--ngram_dir too (--mixture_per_token writes the mixture's).",
    )
    app.define_path(
        "mixture_per_token",
        None,
        "With --ngram_dir: write the mixture's (one weight per context frequency) per-token file here, as --per_token.",
    )
    flags.DEFINE_boolean(
        "save_mixture",
        False,
        "With --ngram_dir: keep the fitted weights as MODEL_DIR/mixture.json, which query, rescore, generate and "
        "the next export then serve.",
    )
    flags.DEFINE_enum(
        "format",
        None,
        ["table", "json"],
        "Output: a table (default on a terminal) or one JSON line (default when piped).",
    )
    model_flags.precision_flag("Score")
    flags.DEFINE_boolean(
        "progress", None, "Show a progress bar of the batches on stderr (default: when stderr is a terminal)."
    )


def check():
    """That --model_dir holds a trained model, --per_token can be written, the text to score is readable and
    --ngram_dir has the model's vocabulary, before TensorFlow loads (a bad --ngram_dir was once refused only
    after the whole split was scored). Returns (corpus, split): the corpus (for the mixture's valid split, or
    the split itself; None with --files alone) and the split to score."""
    if sum(bool(f.value) for f in (FLAGS["model_dir"], FLAGS["model_dirs"], FLAGS["nplm_model"])) != 1:
        raise UserError(
            "give one of --model_dir (a model trained here), --model_dirs (an ensemble) and --nplm_model (an nplm "
            "toolkit file)."
        )
    if FLAGS.save_ensemble and not FLAGS.model_dirs:
        raise UserError("--save_ensemble needs --model_dirs (the ensemble whose weights it keeps).")
    if FLAGS.cache and not FLAGS.model_dirs:
        raise UserError("--cache is an ensemble's member: give the network as --model_dirs=DIR.")
    if FLAGS.model_dirs:
        return check_ensemble()
    if FLAGS.nplm_model:
        given = [
            f"--{f.name}"
            for f in (FLAGS["ngram_dir"], FLAGS["mixture_per_token"], FLAGS["save_mixture"], FLAGS["precision"])
            if f.present
        ]
        if given:
            raise UserError(f"{', '.join(given)} needs --model_dir; leave it out with --nplm_model.")
        files.check_input_file("nplm_model", FLAGS.nplm_model)
        if FLAGS.per_token:
            files.check_output_file("per_token", FLAGS.per_token)
        split = corpus_lib.file_split(FLAGS.files) if FLAGS.files else corpus_flags.corpus_from_flags()[FLAGS.split]
        corpus_lib.check_split(split, order=1)
        return None, split
    run_dir.check_trained(FLAGS.model_dir)
    if FLAGS.ngram_dir:
        run_dir.refuse_other_kind(FLAGS.ngram_dir, "ngram_dir", "ngram")
    if FLAGS.mixture_per_token and not FLAGS.ngram_dir:
        raise UserError("--mixture_per_token needs --ngram_dir (the n-gram the network is mixed with).")
    if FLAGS.save_mixture and not FLAGS.ngram_dir:
        raise UserError("--save_mixture needs --ngram_dir (the n-gram the network is mixed with).")
    if FLAGS.save_mixture:
        files.check_output_file("save_mixture", run_dir.RunDir(FLAGS.model_dir).file(run_dir.MIXTURE))
    for flag in (FLAGS["per_token"], FLAGS["mixture_per_token"]):
        if flag.value:
            files.check_output_file(flag.name, flag.value)
    if (
        FLAGS.per_token
        and FLAGS.mixture_per_token
        and os.path.abspath(FLAGS.per_token) == os.path.abspath(FLAGS.mixture_per_token)
    ):
        raise UserError("--per_token and --mixture_per_token name the same file; give two.")
    # The mixture's weights are always fitted on the valid split of the model's own corpus (or of the corpus
    # flags given), read once.
    run = run_dir.RunDir(FLAGS.model_dir)
    corpus = None
    if FLAGS.ngram_dir or not FLAGS.files:
        corpus = corpus_flags.corpus_from_flags(run.read_corpus(), FLAGS.model_dir)
    split = corpus_lib.file_split(FLAGS.files) if FLAGS.files else corpus[FLAGS.split]
    corpus_lib.check_split(split, order=1)
    if FLAGS.ngram_dir:
        network_mixture.check_same_vocabulary(run.load_vocab(), FLAGS.ngram_dir)
    return corpus, split


def check_ensemble():
    """--model_dirs and --ngram_dir's directories, their shared vocabulary, --cache's decays and the outputs,
    before any scoring."""
    given = [
        f"--{f.name}" for f in (FLAGS["mixture_per_token"], FLAGS["save_mixture"], FLAGS["precision"]) if f.present
    ]
    if given:
        raise UserError(f"{', '.join(given)} is for one --model_dir; leave it out with --model_dirs.")
    model_dirs, _ = model_flags.match_model_dirs(FLAGS.model_dirs)
    ngram_dirs = corpus_lib.split_patterns(FLAGS.ngram_dir) if FLAGS.ngram_dir else []
    for directory in ngram_dirs:
        if not os.path.isdir(directory):
            raise UserError(f"--ngram_dir: {directory} is not a directory; give n-gram directories of nplm_tf.ngram.")
        run_dir.refuse_other_kind(directory, "ngram_dir", "ngram")
    if FLAGS.cache_window < 1:
        raise UserError(f"--cache_window={FLAGS.cache_window} must be at least 1.")
    try:
        decays = cache.check_decays(FLAGS.cache)
    except ValueError as e:
        raise UserError(f"--cache: {e}.") from None
    if decays and FLAGS.save_ensemble:
        raise UserError(
            "--save_ensemble keeps a fit for export and LanguageModel, which cannot serve a cache (their state is "
            "the last n − 1 words): leave out --cache to save one."
        )
    if len(model_dirs) + len(ngram_dirs) + len(decays) < 2:
        raise UserError("an ensemble needs two models at least: give more --model_dirs, an --ngram_dir or --cache.")
    ensemble.Members.check(model_dirs, ngram_dirs)
    for flag in (FLAGS["per_token"], FLAGS["save_ensemble"]):
        if flag.value:
            files.check_output_file(flag.name, flag.value)
    run = run_dir.RunDir(model_dirs[0])
    corpus = corpus_flags.corpus_from_flags(run.read_corpus(), model_dirs[0])
    split = corpus_lib.file_split(FLAGS.files) if FLAGS.files else corpus[FLAGS.split]
    corpus_lib.check_split(split, order=1)
    return corpus, split, model_dirs, ngram_dirs, decays


def output_form() -> str:
    """--format, or its default: a table on a terminal, JSON when piped."""
    return FLAGS.format or ("table" if tables.on_terminal() else "json")
