"""The corpus flags every binary shares: --corpus=brown|files|gcide and their paths."""

from absl import flags

from pipelines import corpus as corpus_lib
from pipelines import gcide

CORPUS = flags.DEFINE_enum(
    "corpus",
    "brown",
    ["brown", "files", "gcide"],
    "brown (the protocol in benchmarks/README.md), files (your own) or gcide (the GNU Collaborative International "
    "Dictionary of English, a large-vocabulary corpus; see --gcide_path).",
)
TRAIN_FILES = flags.DEFINE_string(
    "train_files", None, "With --corpus=files: glob(s), comma-separated, of UTF-8 text, one unit per line."
)
VALID_FILES = flags.DEFINE_string("valid_files", None, "With --corpus=files: validation glob(s).")
TEST_FILES = flags.DEFINE_string("test_files", None, "With --corpus=files: test glob(s).")
GCIDE_PATH = flags.DEFINE_string(
    "gcide_path",
    gcide.DEFAULT_PATH,
    "With --corpus=gcide: dictd's gcide.dict.dz (Debian's dict-gcide package; `apt-get download dict-gcide && "
    "dpkg -x dict-gcide_*.deb DIR` puts it in DIR/usr/share/dictd/).",
)
GCIDE_CACHE = flags.DEFINE_string(
    "gcide_cache", gcide.DEFAULT_CACHE, "With --corpus=gcide: where its text is kept once converted."
)


def corpus_from_flags() -> corpus_lib.Corpus:
    if CORPUS.value == "brown":
        return corpus_lib.brown_corpus()
    if CORPUS.value == "gcide":
        return gcide.gcide_corpus(GCIDE_PATH.value, GCIDE_CACHE.value)
    missing = [f"--{f.name}" for f in (TRAIN_FILES, VALID_FILES, TEST_FILES) if not f.value]
    if missing:
        raise corpus_lib.CorpusError(f"--corpus=files needs {', '.join(missing)}.")
    return corpus_lib.files_corpus(TRAIN_FILES.value, VALID_FILES.value, TEST_FILES.value)
