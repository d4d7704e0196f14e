"""The corpus flags every binary shares: --corpus=brown|files|gcide and their paths."""

import sys

from absl import flags

from pipelines import app, corpora, gcide
from pipelines import corpus as corpus_lib

CORPUS = flags.DEFINE_enum(
    "corpus",
    "brown",
    ["brown", "files", "gcide"],
    "brown (the protocol in benchmarks/README.md), files (your own) or gcide (the GNU Collaborative International "
    "Dictionary of English, a large-vocabulary corpus; see --gcide_path).",
)
TRAIN_FILES = flags.DEFINE_string(
    "train_files",
    None,
    "With --corpus=files: glob(s), comma-separated, of UTF-8 text, one unit per line (a file matched twice is read "
    "once).",
)
VALID_FILES = flags.DEFINE_string("valid_files", None, "With --corpus=files: validation glob(s).")
TEST_FILES = flags.DEFINE_string("test_files", None, "With --corpus=files: test glob(s).")
GCIDE_PATH = app.define_path(
    "gcide_path",
    gcide.DEFAULT_PATH,
    "With --corpus=gcide: dictd's gcide.dict.dz (Debian's dict-gcide package; `apt-get download dict-gcide && "
    "dpkg -x dict-gcide_*.deb DIR` puts it in DIR/usr/share/dictd/).",
)
GCIDE_CACHE = app.define_path(
    "gcide_cache", gcide.DEFAULT_CACHE, "With --corpus=gcide: where its text is kept once converted."
)


FLAGS = (CORPUS, TRAIN_FILES, VALID_FILES, TEST_FILES, GCIDE_PATH, GCIDE_CACHE)
_CORPUS_OF = {  # the corpus each path flag is for
    "train_files": "files",
    "valid_files": "files",
    "test_files": "files",
    "gcide_path": "gcide",
    "gcide_cache": "gcide",
}


def corpus_from_flags(remembered: dict | None = None, model_dir: str | None = None) -> corpus_lib.Corpus:
    """The corpus the flags name; `remembered` (`model_dir`'s corpus.json) fills in the flags not given.

    A model directory that kept no corpus.json (one trained before runs kept it, or on lines a program gave)
    with no corpus flag given reads the default, Brown: that is said, since the model may not be Brown's.
    Called from Python with no flags parsed (a library call, as `tools.lines.LineScorer`'s), it takes the
    flags' defaults.
    """
    parsed = flags.FLAGS.is_parsed()
    given = {flag.name for flag in FLAGS if parsed and flag.present}
    flags_given = bool(given)
    if model_dir is not None and remembered is None and not flags_given:
        print(
            f"warning: {model_dir} does not say which corpus it was trained on (it has no corpus.json); reading "
            "--corpus=brown, the default: give the corpus flags if that is not its corpus.",
            file=sys.stderr,
            flush=True,
        )
    spec = dict(remembered or {})
    for flag in FLAGS:
        if flag.name in given or flag.name not in spec:
            spec[flag.name] = flag.value if parsed else flag.default
    # A path flag of another corpus would be ignored without a word (`--train_files=x` alone trains on Brown).
    ignored = [f.name for f in FLAGS if f.name in given and _CORPUS_OF.get(f.name, spec["corpus"]) != spec["corpus"]]
    if ignored:
        wanted = _CORPUS_OF[ignored[0]]
        names = [f"--{name}" for name in ignored if _CORPUS_OF[name] == wanted]
        one = len(names) == 1
        raise corpus_lib.CorpusError(
            f"{', '.join(names)} {'is' if one else 'are'} for --corpus={wanted}, but the corpus is {spec['corpus']}; "
            f"add --corpus={wanted} or leave {'it' if one else 'them'} out."
        )
    corpus = corpora.corpus_from_spec(spec)
    for split, paths in corpus_lib.files_shared_with_train(corpus).items():
        named = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        print(
            f"warning: --{split}_files and --train_files share {named}: {split} perplexity is then measured on "
            "text the model trained on.",
            file=sys.stderr,
            flush=True,
        )
    return corpus
