"""Exact perplexity of a trained model on a corpus split or on files.

    python -m nplm_tf.evaluate --model_dir=DIR                  # the test split of its own corpus
    python -m nplm_tf.evaluate --model_dir=DIR --files='x/*.txt' --per_token=out.tsv

    python -m nplm_tf.evaluate --model_dir=DIR --ngram_dir=KN --save_mixture   # fit, report, and keep the fit
    python -m nplm_tf.evaluate --nplm_model=FILE --per_token=out.tsv   # a model trained by the nplm toolkit
    python -m nplm_tf.evaluate --model_dirs='runs/s*' --ngram_dir=runs/kn5,runs/kn3   # an ensemble

Prints the perplexity, tokens and OOV rate (and with --ngram_dir the mixtures' perplexities): a short table
on a terminal, one JSON line when piped or with --format=json. --per_token writes one line per predicted
token: the token (as the vocabulary sees it), ln P and log10 P (the network's; with --ngram_dir,
--mixture_per_token writes the mixture's, and `nplm_tf.compare` compares two such files).

The mixture's weights are fitted on the valid split and reported; nothing in DIR changes unless
--save_mixture, which keeps the fit as DIR/mixture.json: `query`, `rescore`, `generate` and the next `export`
of DIR then serve the mixture (each with --nomixture leaves it out).

--nplm_model scores with a model file of the USC/ISI nplm toolkit (one tanh hidden layer, `num_hidden 0`:
what equation (1) covers) instead of a model directory, on --files or the corpus flags' split, tokenized as
ours; its --per_token file compares with ours by `nplm_tf.compare`.

--model_dirs mixes several networks (any heads and shapes, one vocabulary) and the n-grams of --ngram_dir
(comma-separated) linearly, weights uniform, by EM on valid, and per context frequency (`tools/ensemble.py`),
in NumPy; --per_token writes the ensemble's, and --save_ensemble=FILE keeps the fit. --cache=0.999 adds a
cache of the text so far (`baselines/cache.py`: a unigram model of the document's words so far, SRILM's
`-cache`) as one more member: a document is a Brown text, or the lines of a file between blank lines; a text
with no blank line gets the last --cache_window words, across lines. No served model keeps it.
"""

import json
import os
import sys

from absl import flags

from nplm_tf import run_dir
from nplm_tf.baselines import cache, network_mixture
from nplm_tf.tools import ensemble, evaluation, model_flags
from pipelines import app, corpus_flags, files, tables
from pipelines import corpus as corpus_lib
from pipelines.errors import UserError

MODEL_DIR = app.define_path("model_dir", None, "A directory written by nplm_tf.train.")
MODEL_DIRS = flags.DEFINE_string(
    "model_dirs", None, "Instead of --model_dir: an ensemble's networks, comma-separated directories or globs."
)
SAVE_ENSEMBLE = app.define_path("save_ensemble", None, "With --model_dirs: keep the fitted weights in this JSON file.")
CACHE = flags.DEFINE_list(
    "cache",
    [],
    "With --model_dirs: also mix in a cache of the words of the document so far, one for each decay given "
    "(comma-separated, each in (0, 1]; 1: no decay), e.g. 0.999. A document: a Brown text, or the lines between "
    "blank lines of a file (or a file); a text with no blank line gets the last --cache_window words.",
)
CACHE_WINDOW = flags.DEFINE_integer(
    "cache_window", 500, "With --cache, where the text marks no documents: the words the cache keeps, across lines."
)
NPLM_MODEL = app.define_path(
    "nplm_model", None, "Instead of --model_dir: a model file of the nplm toolkit (num_hidden 0, tanh) to score."
)
SPLIT = flags.DEFINE_enum(
    "split",
    "test",
    ["train", "valid", "test"],
    "Which split to score, of the corpus the model was trained on (or of the corpus flags given).",
)
FILES = flags.DEFINE_string("files", None, "Score these UTF-8 files (glob(s), comma-separated) instead of --corpus.")
NGRAM_DIR = app.define_path(
    "ngram_dir", None, "An nplm_tf.ngram output: also report the network mixed with it (weights fitted on valid)."
)
PER_TOKEN = app.define_path(
    "per_token",
    None,
    "Write token<TAB>ln_prob<TAB>log10_prob per predicted token here: the network's probabilities, with "
    "--ngram_dir too (--mixture_per_token writes the mixture's).",
)
MIXTURE_PER_TOKEN = app.define_path(
    "mixture_per_token",
    None,
    "With --ngram_dir: write the mixture's (one weight per context frequency) per-token file here, as --per_token.",
)
SAVE_MIXTURE = flags.DEFINE_boolean(
    "save_mixture",
    False,
    "With --ngram_dir: keep the fitted weights as MODEL_DIR/mixture.json, which query, rescore, generate and "
    "the next export then serve.",
)
FORMAT = flags.DEFINE_enum(
    "format", None, ["table", "json"], "Output: a table (default on a terminal) or one JSON line (default when piped)."
)
PRECISION = model_flags.precision_flag("Score")
PROGRESS = flags.DEFINE_boolean(
    "progress", None, "Show a progress bar of the batches on stderr (default: when stderr is a terminal)."
)


def check():
    """That --model_dir holds a trained model, --per_token can be written, the text to score is readable and
    --ngram_dir has the model's vocabulary, before TensorFlow loads (a bad --ngram_dir was once refused only
    after the whole split was scored). Returns (corpus, split): the corpus (for the mixture's valid split, or
    the split itself; None with --files alone) and the split to score."""
    if sum(bool(f.value) for f in (MODEL_DIR, MODEL_DIRS, NPLM_MODEL)) != 1:
        raise UserError(
            "give one of --model_dir (a model trained here), --model_dirs (an ensemble) and --nplm_model (an nplm "
            "toolkit file)."
        )
    if SAVE_ENSEMBLE.value and not MODEL_DIRS.value:
        raise UserError("--save_ensemble needs --model_dirs (the ensemble whose weights it keeps).")
    if CACHE.value and not MODEL_DIRS.value:
        raise UserError("--cache is an ensemble's member: give the network as --model_dirs=DIR.")
    if MODEL_DIRS.value:
        return check_ensemble()
    if NPLM_MODEL.value:
        given = [f"--{f.name}" for f in (NGRAM_DIR, MIXTURE_PER_TOKEN, SAVE_MIXTURE, PRECISION) if f.present]
        if given:
            raise UserError(f"{', '.join(given)} needs --model_dir; leave it out with --nplm_model.")
        files.check_input_file("nplm_model", NPLM_MODEL.value)
        if PER_TOKEN.value:
            files.check_output_file("per_token", PER_TOKEN.value)
        split = corpus_lib.file_split(FILES.value) if FILES.value else corpus_flags.corpus_from_flags()[SPLIT.value]
        corpus_lib.check_split(split, order=1)
        return None, split
    run_dir.check_trained(MODEL_DIR.value)
    if NGRAM_DIR.value:
        run_dir.refuse_other_kind(NGRAM_DIR.value, "ngram_dir", "ngram")
    if MIXTURE_PER_TOKEN.value and not NGRAM_DIR.value:
        raise UserError("--mixture_per_token needs --ngram_dir (the n-gram the network is mixed with).")
    if SAVE_MIXTURE.value and not NGRAM_DIR.value:
        raise UserError("--save_mixture needs --ngram_dir (the n-gram the network is mixed with).")
    if SAVE_MIXTURE.value:
        files.check_output_file("save_mixture", run_dir.RunDir(MODEL_DIR.value).file(run_dir.MIXTURE))
    for flag in (PER_TOKEN, MIXTURE_PER_TOKEN):
        if flag.value:
            files.check_output_file(flag.name, flag.value)
    if (
        PER_TOKEN.value
        and MIXTURE_PER_TOKEN.value
        and os.path.abspath(PER_TOKEN.value) == os.path.abspath(MIXTURE_PER_TOKEN.value)
    ):
        raise UserError("--per_token and --mixture_per_token name the same file; give two.")
    # The mixture's weights are always fitted on the valid split of the model's own corpus (or of the corpus
    # flags given), read once.
    run = run_dir.RunDir(MODEL_DIR.value)
    corpus = None
    if NGRAM_DIR.value or not FILES.value:
        corpus = corpus_flags.corpus_from_flags(run.read_corpus(), MODEL_DIR.value)
    split = corpus_lib.file_split(FILES.value) if FILES.value else corpus[SPLIT.value]
    corpus_lib.check_split(split, order=1)
    if NGRAM_DIR.value:
        network_mixture.check_same_vocabulary(run.load_vocab(), NGRAM_DIR.value)
    return corpus, split


def check_ensemble():
    """--model_dirs and --ngram_dir's directories, their shared vocabulary, --cache's decays and the outputs,
    before any scoring."""
    given = [f"--{f.name}" for f in (MIXTURE_PER_TOKEN, SAVE_MIXTURE, PRECISION) if f.present]
    if given:
        raise UserError(f"{', '.join(given)} is for one --model_dir; leave it out with --model_dirs.")
    model_dirs, _ = model_flags.match_model_dirs(MODEL_DIRS.value)
    ngram_dirs = corpus_lib.split_patterns(NGRAM_DIR.value) if NGRAM_DIR.value else []
    for directory in ngram_dirs:
        if not os.path.isdir(directory):
            raise UserError(f"--ngram_dir: {directory} is not a directory; give n-gram directories of nplm_tf.ngram.")
        run_dir.refuse_other_kind(directory, "ngram_dir", "ngram")
    if CACHE_WINDOW.value < 1:
        raise UserError(f"--cache_window={CACHE_WINDOW.value} must be at least 1.")
    try:
        decays = cache.check_decays(CACHE.value)
    except ValueError as e:
        raise UserError(f"--cache: {e}.") from None
    if decays and SAVE_ENSEMBLE.value:
        raise UserError(
            "--save_ensemble keeps a fit for export and LanguageModel, which cannot serve a cache (their state is "
            "the last n − 1 words): leave out --cache to save one."
        )
    if len(model_dirs) + len(ngram_dirs) + len(decays) < 2:
        raise UserError("an ensemble needs two models at least: give more --model_dirs, an --ngram_dir or --cache.")
    ensemble.Members.check(model_dirs, ngram_dirs)
    for flag in (PER_TOKEN, SAVE_ENSEMBLE):
        if flag.value:
            files.check_output_file(flag.name, flag.value)
    run = run_dir.RunDir(model_dirs[0])
    corpus = corpus_flags.corpus_from_flags(run.read_corpus(), model_dirs[0])
    split = corpus_lib.file_split(FILES.value) if FILES.value else corpus[SPLIT.value]
    corpus_lib.check_split(split, order=1)
    return corpus, split, model_dirs, ngram_dirs, decays


def evaluate_ensemble(corpus, split, model_dirs, ngram_dirs, decays) -> None:
    members = ensemble.Members.load(model_dirs, ngram_dirs, decays, CACHE_WINDOW.value)
    report, fit = evaluation.score_ensemble(members, corpus, split, PER_TOKEN.value)
    print(json.dumps(report) if output_form() == "json" else evaluation.ensemble_table(report), flush=True)
    if SAVE_ENSEMBLE.value:
        ensemble.save_fit(SAVE_ENSEMBLE.value, fit)
        print(f"saved the ensemble's weights in {SAVE_ENSEMBLE.value}.", file=sys.stderr)


def main(argv, checked):
    if MODEL_DIRS.value:
        evaluate_ensemble(*checked)
        return
    if NPLM_MODEL.value:
        evaluate_nplm(checked[1])
        return
    app.import_tensorflow_quietly()
    corpus, split = checked
    progress = sys.stderr.isatty() if PROGRESS.value is None else PROGRESS.value
    summary, fit = evaluation.score_network(
        MODEL_DIR.value,
        corpus,
        split,
        NGRAM_DIR.value,
        PER_TOKEN.value,
        MIXTURE_PER_TOKEN.value,
        PRECISION.value,
        progress,
    )
    print(json.dumps(summary) if output_form() == "json" else evaluation.summary_table(summary), flush=True)
    if NGRAM_DIR.value:
        if SAVE_MIXTURE.value:
            saved = network_mixture.save_fit(MODEL_DIR.value, {"fit": fit})
            print(
                f"saved the weights per context frequency in {saved}: query, rescore, generate and the next export "
                f"of {MODEL_DIR.value} now serve the mixture with {fit['ngram_dir']} (--nomixture leaves it out).",
                file=sys.stderr,
            )
        else:
            print(
                f"note: nothing was saved; --save_mixture keeps this fit in {MODEL_DIR.value}, whose tools and "
                "exports then serve the mixture.",
                file=sys.stderr,
            )


def evaluate_nplm(split) -> None:
    summary = evaluation.score_nplm(NPLM_MODEL.value, split, PER_TOKEN.value)
    print(json.dumps(summary) if output_form() == "json" else evaluation.summary_table(summary), flush=True)


def output_form() -> str:
    """--format, or its default: a table on a terminal, JSON when piped."""
    return FORMAT.value or ("table" if tables.on_terminal() else "json")


def run():
    app.run(main, check, tensorflow=False)  # loaded in `main`, where a model directory is scored


if __name__ == "__main__":
    run()
