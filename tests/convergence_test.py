"""`nplm_tf.train` without flags trains until the valid perplexity stops improving (`--min_improvement`, within
`--epochs`); configs written without these fields, and runs set up before, keep their meaning."""

from __future__ import annotations

import json
import os

import pytest

from nplm_tf.core.config import Config
from nplm_tf.training import callbacks
from tests import helpers

# The default Brown run's valid perplexity per epoch (benchmarks/README.md, `benchmarks.brown`).
BROWN = [210.88, 185.03, 183.53, 177.26, 176.55, 174.83, 174.06, 174.47]


def test_a_gain_counts_only_beyond_min_improvement():
    # Brown stops after its eighth epoch, as the fixed eight epochs did: epochs 7 and 8 gained 0.44% and lost.
    assert callbacks.patience_exhausted(BROWN, 2, 0.005)
    assert not callbacks.patience_exhausted(BROWN[:7], 2, 0.005)
    assert not callbacks.patience_exhausted(BROWN, 2, 0.0)  # any gain: epoch 7 was better, one epoch since
    steady = [100 * 0.996**k for k in range(30)]  # 0.4% an epoch: 0.8% every two, so it never stops
    assert not callbacks.patience_exhausted(steady, 2, 0.005)
    slow = [100 * 0.998**k for k in range(3)]  # 0.2% an epoch: two epochs gain 0.4%
    assert callbacks.patience_exhausted(slow, 2, 0.005) and not callbacks.patience_exhausted(slow, 2, 0.0)
    assert not callbacks.patience_exhausted([], 2, 0.005)


def test_the_library_config_keeps_eight_epochs_and_any_gain():
    """A --config_json or config.json written without the new field means what it meant."""
    assert (Config().epochs, Config().min_improvement) == (8, 0.0)
    assert Config.from_dict({"order": 3}).min_improvement == 0.0


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    return helpers.tiny_corpus_files(tmp_path_factory.mktemp("convergence"), train=100, valid=20, test=20)


def test_train_without_epochs_stops_where_the_gain_stops(paths, tmp_path):
    model_dir = str(tmp_path / "m")
    result = helpers.run_binary(
        "nplm_tf.train", f"--model_dir={model_dir}", *helpers.TINY_FLAGS, "--noexport", *helpers.files_flags(paths)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    config = json.load(open(os.path.join(model_dir, "config.json")))
    assert (config["epochs"], config["min_improvement"]) == (40, 0.005)
    history = json.load(open(os.path.join(model_dir, "history.json")))
    valid = [history[e]["valid_perplexity"] for e in sorted(history, key=int)]
    assert 2 < len(valid) < 40 and "stopping early: no valid perplexity 0.5% below the best" in result.stdout
    assert callbacks.patience_exhausted(valid, 2, 0.005) and not callbacks.patience_exhausted(valid[:-1], 2, 0.005)


def test_a_run_set_up_before_resumes_as_it_was_set_up(paths, tmp_path):
    """Run again with no flags but its directory, a finished run set up with other settings (and without the new
    field, as one written before it) is found finished, not refused as another configuration nor trained on."""
    model_dir = str(tmp_path / "old")
    flags = [f"--model_dir={model_dir}", "--noexport", *helpers.files_flags(paths)]
    first = helpers.run_binary("nplm_tf.train", *flags, *helpers.TINY_FLAGS, "--epochs=2")
    assert first.returncode == 0, first.stderr[-3000:]
    path = os.path.join(model_dir, "config.json")
    written = json.load(open(path))
    del written["min_improvement"]
    json.dump(written, open(path, "w"))
    history = open(os.path.join(model_dir, "history.json")).read()
    again = helpers.run_binary("nplm_tf.train", *flags)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already holds a finished run with this config" in again.stdout
    assert open(os.path.join(model_dir, "history.json")).read() == history
    more = helpers.run_binary("nplm_tf.train", *flags, "--epochs=3")  # a flag given still changes what it names
    assert more.returncode == 0, more.stderr[-3000:]
    assert len(json.load(open(os.path.join(model_dir, "history.json")))) == 3


def test_the_head_grows_with_the_vocabulary(tmp_path):
    from nplm_tf.training import run_setup
    from nplm_tf.training.data import LARGE_VOCABULARY
    from pipelines import corpus as corpus_lib

    def chosen(words: int, **fields):
        corpus = corpus_lib.files_corpus(*helpers.vocabulary_files(tmp_path, words).values())
        return run_setup.head_for_vocabulary(Config(order=3, min_count=1, **fields), corpus)

    config, note = chosen(LARGE_VOCABULARY - 2)  # with </s> and <unk>: |V| = LARGE_VOCABULARY
    assert config.shortlist == run_setup.LARGE_VOCABULARY_SHORTLIST and config.tail == "class"
    assert note.startswith(f"|V| = {LARGE_VOCABULARY:,}: a short list of the 4,000 most frequent words")
    assert chosen(LARGE_VOCABULARY - 3) == (Config(order=3, min_count=1), None)
    assert chosen(LARGE_VOCABULARY + 100, max_vocab=1000) == (Config(order=3, min_count=1, max_vocab=1000), None)


@pytest.mark.parametrize("flags, shortlist", [([], 4000), (["--shortlist=0"], 0)])
def test_train_on_a_large_vocabulary_takes_a_short_list_unless_told(tmp_path, flags, shortlist):
    from nplm_tf.training.data import LARGE_VOCABULARY

    model_dir = str(tmp_path / "m")
    args = [f"--model_dir={model_dir}", "--epochs=1", "--noexport", *helpers.TINY_FLAGS, "--batch_size=256"]
    result = helpers.run_binary(
        "nplm_tf.train", *args, *helpers.files_flags(helpers.vocabulary_files(tmp_path, LARGE_VOCABULARY)), *flags
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.load(open(os.path.join(model_dir, "config.json")))["shortlist"] == shortlist
    assert ("a short list of the 4,000 most frequent words" in result.stdout) == (shortlist > 0)


def test_the_mlp9_config_is_what_train_trained_before_its_defaults_grew():
    """`--config_json=nplm_tf/configs/mlp9.json` trains what `train` without flags trained before its defaults
    grew (the paper's MLP9 shape, no average, until the gain stops): the figures measured so reproduce."""
    path = os.path.join(helpers.ROOT, "nplm_tf", "configs", "mlp9.json")
    assert Config.from_json(path) == Config(epochs=40, min_improvement=0.005)


@pytest.mark.parametrize(
    "flags, average",
    [
        ([], 0.9997),
        (["--strategy=multi_worker"], 0.9997),  # the one run loop keeps it on every strategy
        (["--strategy=multi_worker", "--average=0.999"], 0.999),
    ],
)
def test_the_default_average_is_the_same_on_every_strategy(tmp_path, flags, average):
    import subprocess
    import sys

    probe = (
        "import sys; from absl import flags; import nplm_tf.train as t; flags.FLAGS(sys.argv); "
        "print(t.config_from_flags().average)"
    )
    args = [sys.executable, "-c", probe, f"--model_dir={tmp_path / 'm'}", "--precision=float32", *flags]
    out = subprocess.run(args, cwd=helpers.ROOT, capture_output=True, text=True, check=True)
    assert float(out.stdout.split()[-1]) == average
