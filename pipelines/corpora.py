"""A corpus from the values of its flags, with no flag defined: what a model directory's corpus.json records
(`nplm_tf.core.run_dir`) is read back here, by libraries as by binaries (`pipelines.corpus_flags`)."""

from __future__ import annotations

from pipelines import corpus as corpus_lib
from pipelines import gcide


def corpus_from_spec(spec: dict) -> corpus_lib.Corpus:
    """A corpus from corpus flag values ({"corpus": "files", "train_files": ..., ...}); its own `spec` holds
    them with paths absolute."""
    kind = spec["corpus"]
    if kind == "brown":
        return corpus_lib.brown_corpus()
    if kind == "gcide":
        return gcide.gcide_corpus(spec["gcide_path"], spec["gcide_cache"])
    if kind == "files":
        missing = [f"--{name}" for name in ("train_files", "valid_files", "test_files") if not spec.get(name)]
        if missing:
            raise corpus_lib.CorpusError(f"--corpus=files needs {', '.join(missing)}.")
        return corpus_lib.files_corpus(spec["train_files"], spec["valid_files"], spec["test_files"])
    raise corpus_lib.CorpusError(f"corpus={kind!r} must be one of brown, files, gcide.")
