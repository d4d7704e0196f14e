"""export(model_dir, export_dir): a self-contained SavedModel for TensorFlow Serving (`export_ensemble`: an
ensemble's, from its fit).

    EXPORT_DIR/<version>/saved_model.pb, variables/, assets/vocab.tsv, assets/export.json

Signatures (all take raw UTF-8 strings; see `server.Server`):
  serving_default  text [B]                      -> top-10 next words
  next_word        text [B], k []                -> top-k next words and probabilities
  score            text [B]                      -> per-token ln P, mask, lengths, sums, perplexities, OOV flags
  generate         prompt [B], max_tokens [], temperature [], top_k [], seed [], allow_unk [] -> continued text

When the model directory holds a fitted mixture (mixture.json, written by
`nplm_tf.evaluate --ngram_dir`), the n-gram's tables go into the SavedModel
and every served probability is the context-frequency mixture's.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import keras
import tensorflow as tf

from nplm_tf.baselines import network_mixture, ngram_graph
from nplm_tf.core import run_dir
from nplm_tf.core.config import ConfigError
from nplm_tf.network import loading
from nplm_tf.serving import server as server_lib
from pipelines import files
from pipelines import vocabulary as vocab_lib
from pipelines.errors import UserError

INFO_FILE = "export.json"
SIGNATURES = ("serving_default", "next_word", "score", "generate")


def _text(name):
    return tf.TensorSpec([None], tf.string, name=name)


def _scalar(name, dtype):
    return tf.TensorSpec([], dtype, name=name)


def load_mixture(model_dir: str, vocab: vocab_lib.Vocabulary, ngram=None):
    """The mixture fitted by `evaluate --ngram_dir` as a `ngram_graph.ServingNgram`, or None when there is none.
    `ngram`: the n-gram model of mixture.json, read and checked by the caller, which has just fitted the
    weights to it (training's refit), so that it is not read and checked again."""
    saved = run_dir.RunDir(model_dir).read_mixture()
    if saved is None:
        return None, None
    if ngram is not None:
        return ngram_graph.serving_model(ngram, saved["context_frequency"]), saved
    path = run_dir.RunDir(model_dir).file(run_dir.MIXTURE)
    ngram_dir = saved["ngram_dir"]
    if not os.path.isdir(ngram_dir):
        raise ConfigError(
            f"{path} names the n-gram model {ngram_dir}, which no longer exists; rebuild it or pass --nomixture."
        )
    ngram = network_mixture.load_checked(vocab, ngram_dir)
    if not network_mixture.fitted_with(saved, ngram):
        raise ConfigError(
            f"{path} was fitted with the n-gram model in {ngram_dir} as it was before it was rebuilt; fit it again "
            f"(nplm_tf.evaluate --model_dir={model_dir} --ngram_dir={ngram_dir}) or pass --nomixture."
        )
    # Of any order: the served contexts hold the n-gram's K - 1 words when K > n (`server.Server`).
    return ngram_graph.serving_model(ngram, saved["context_frequency"]), saved


def _signatures(server: server_lib.Server) -> dict:
    """The concrete function of every signature, each traced once (see `_saved_object`)."""

    def concrete(fn, *spec):
        return tf.function(fn, input_signature=list(spec), autograph=False).get_concrete_function()

    k = server_lib.DEFAULT_K
    return {
        "serving_default": concrete(lambda text: server.next_word(text, k), _text("text")),
        "next_word": concrete(server.next_word, _text("text"), _scalar("k", tf.int32)),
        "score": concrete(server.score, _text("text")),
        "generate": concrete(server.generate, *generate_signature()),
    }


def generate_signature() -> list[tf.TensorSpec]:
    """The inputs of `server.Server.generate`, as the `generate` signature takes them (`nplm_tf.generate` traces
    it so too)."""
    return [
        _text("prompt"),
        _scalar("max_tokens", tf.int32),
        _scalar("temperature", tf.float32),
        _scalar("top_k", tf.int32),
        _scalar("seed", tf.int64),
        _scalar("allow_unk", tf.bool),
    ]


def _saved_object(server: server_lib.Server, signatures: dict) -> tf.Module:
    """What the SavedModel holds: the server's variables that a signature reads, and its two vocabulary tables
    (with `vocab.tsv`, their asset).

    Not the server itself: some of its variables serve no signature of a given export (a short list's ranked
    tail under a mixture, whose words come from the dense distribution: a quarter of Brown's back-off export).
    Nor the signatures' functions: tracked as attributes of the saved object, as `keras.export.ExportArchive`
    tracks them, each was traced a second time by `tf.saved_model.save`, which made an export slower.
    """
    read = {id(v) for function in signatures.values() for v in function.variables}
    root = tf.Module(name="nplm_export")
    root.read_variables = [v for v in server.variables if id(v) in read]
    root.tables = [server.ids_table, server.words_table]
    return root


def next_version(export_dir: str) -> int:
    versions = [int(d) for d in os.listdir(export_dir) if d.isdigit()] if os.path.isdir(export_dir) else []
    return max(versions, default=0) + 1


def export(
    model_dir: str,
    export_dir: str | None = None,
    version: int | None = None,
    mixture: bool | None = True,
    model: keras.Model | None = None,
    precision: str | None = None,
    ngram=None,
) -> str:
    """Writes EXPORT_DIR/<version> (default: model_dir/export, next free version) and returns its path.

    `mixture`: serve the n-gram mixture fitted by `evaluate --ngram_dir` (True: a ConfigError when it cannot
    be served), never (False), or where it can (None, training's own export: the run it ends is written in
    full, and a note says why the mixture is left out).

    An existing version directory is never replaced: the export is written
    beside it and moved into place only when complete. `precision`: serve in
    this one instead of the run's (`loading.load_trained`); export.json's
    config says which. `ngram`: the mixture's n-gram, already read (`load_mixture`).
    """
    run = run_dir.RunDir(model_dir)
    export_dir = export_dir or run.export_dir
    config, vocab, loaded = loading.load_trained(model_dir, precision)
    model = model or loaded
    version = next_version(export_dir) if version is None else version
    if version < 0:
        raise ConfigError(f"version={version} must be a non-negative integer.")
    target = os.path.join(export_dir, str(version))
    if os.path.exists(target):
        raise ConfigError(f"{target} already exists; choose another --version (or leave it out for the next free one).")
    try:
        ngram, saved = load_mixture(model_dir, vocab, ngram) if mixture is not False else (None, None)
    except UserError as e:  # no n-gram there, another vocabulary, a changed file
        if mixture:
            raise
        print(f"note: this export serves the network alone, without the mixture of mixture.json: {e}", flush=True)
        ngram, saved = None, None

    server = server_lib.Server(model, vocab, run.vocab_path, ngram)
    info = {
        "config": config.to_dict(),
        "vocab_size": vocab.size,
        "signatures": list(SIGNATURES),
        "mixture": None
        if saved is None
        else {"ngram_order": saved["ngram_order"], "context_frequency": saved["context_frequency"]},
    }
    # The network alone, in float32 (what NumPy computes): its own files travel with the export, so that
    # `LanguageModel` reads it in NumPy, without TensorFlow, wherever the export is copied.
    own = model_dir if saved is None and config.precision == loading.SCORING_PRECISION else None
    return _write(server, info, export_dir, target, version, own)


def export_ensemble(
    fit: dict,
    weights,
    vocab: vocab_lib.Vocabulary,
    export_dir: str,
    version: int | None = None,
    precision: str | None = None,
) -> str:
    """Writes an ensemble (`evaluate --model_dirs … --save_ensemble=FIT`, read by `tools.ensemble.read_fit`:
    `fit`, its `weights` (buckets or 1, members), the members' shared `vocab`) as one SavedModel,
    EXPORT_DIR/<version>, and returns its path: every network's weights and head, every n-gram's tables and
    the fitted weights, with the signatures of a single model's export. `precision`: serve every network in
    this one instead of its run's."""
    version = next_version(export_dir) if version is None else version
    target = os.path.join(export_dir, str(version))
    if os.path.exists(target):
        raise ConfigError(f"{target} already exists; choose another --version (or leave it out for the next free one).")
    loaded = [loading.load_trained(d, precision) for d in fit["model_dirs"]]
    ngrams = [network_mixture.load_checked(vocab, d) for d in fit["ngram_dirs"]]
    server = server_lib.Server(
        [model for _, _, model in loaded],
        vocab,
        run_dir.RunDir(fit["model_dirs"][0]).vocab_path,
        [ngram_graph.serving_model(ngram) for ngram in ngrams],
        weights,
    )
    orders = [config.order for config, _, _ in loaded] + [ngram.order for ngram in ngrams]
    info = {
        "config": loaded[0][0].to_dict(),
        "order": max(orders),
        "vocab_size": vocab.size,
        "signatures": list(SIGNATURES),
        "mixture": None,
        "ensemble": {**fit, "configs": [config.to_dict() for config, _, _ in loaded]},
    }
    return _write(server, info, export_dir, target, version)


def _copy_network(model_dir: str, export: str) -> None:
    """Into the export's `run_dir.EXPORT_NETWORK`, the files `NumpyNetwork.load` reads: config.json, vocab.tsv,
    the best weights and a short list's tail n-gram (vocab.tsv and ngram.npz)."""
    run, out = run_dir.RunDir(model_dir), run_dir.RunDir(os.path.join(export, run_dir.EXPORT_NETWORK))
    os.makedirs(out.path, exist_ok=True)
    for name in (run_dir.CONFIG, run_dir.VOCAB, run_dir.BEST_WEIGHTS):
        shutil.copyfile(run.file(name), out.file(name))
    tail = run_dir.RunDir(run.tail_ngram_dir)
    if os.path.isfile(tail.ngram_model):
        os.makedirs(out.tail_ngram_dir, exist_ok=True)
        for name in (run_dir.VOCAB, run_dir.NGRAM_MODEL):
            shutil.copyfile(tail.file(name), os.path.join(out.tail_ngram_dir, name))


def _write(
    server: server_lib.Server, info: dict, export_dir: str, target: str, version: int, model_dir: str | None = None
) -> str:
    """The SavedModel of `server` and its export.json at `target`, written beside it and moved into place;
    `model_dir`: the network whose own files go along (`_copy_network`)."""
    signatures = _signatures(server)
    os.makedirs(export_dir, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{version}.tmp-", dir=export_dir)
    try:
        tf.saved_model.save(_saved_object(server, signatures), staging, signatures=signatures)
        files.write_json(os.path.join(staging, "assets", INFO_FILE), info)
        if model_dir is not None:
            _copy_network(model_dir, staging)
        os.chmod(staging, 0o755)  # mkdtemp's 0700 would hide the model from a server run as another user
        os.replace(staging, target)
    finally:
        if os.path.isdir(staging):
            shutil.rmtree(staging, ignore_errors=True)
    return target
