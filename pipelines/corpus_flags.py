"""The corpus flags every binary shares: --corpus=brown|files and the file globs."""

from absl import flags

from pipelines import corpus as corpus_lib

CORPUS = flags.DEFINE_enum(
    "corpus", "brown", ["brown", "files"], "Brown (the protocol in benchmarks/README.md) or your own files."
)
TRAIN_FILES = flags.DEFINE_string(
    "train_files", None, "With --corpus=files: glob(s), comma-separated, of UTF-8 text, one unit per line."
)
VALID_FILES = flags.DEFINE_string("valid_files", None, "With --corpus=files: validation glob(s).")
TEST_FILES = flags.DEFINE_string("test_files", None, "With --corpus=files: test glob(s).")


def corpus_from_flags() -> corpus_lib.Corpus:
    if CORPUS.value == "brown":
        return corpus_lib.brown_corpus()
    missing = [f"--{f.name}" for f in (TRAIN_FILES, VALID_FILES, TEST_FILES) if not f.value]
    if missing:
        raise corpus_lib.CorpusError(f"--corpus=files needs {', '.join(missing)}.")
    return corpus_lib.files_corpus(TRAIN_FILES.value, VALID_FILES.value, TEST_FILES.value)
