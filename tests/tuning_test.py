"""keras-tuner searches: the search space, a MirroredStrategy search, and chief/worker tuning on loopback."""

import glob
import json
import os
import signal
import time

import keras_tuner
import pytest

from nplm_tf.core.config import Config, ConfigError
from nplm_tf.training import strategies
from tests import helpers
from tuning import hypermodel as hypermodel_lib
from tuning import search_lib


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("tune")
    paths = helpers.tiny_corpus_files(root, train=40, valid=8, test=8)
    base = os.path.join(str(root), "base.json")
    with open(base, "w") as f:
        json.dump(helpers.tiny_config(epochs=1).to_dict(), f)
    return [
        "--corpus=files",
        f"--train_files={paths['train']}",
        f"--valid_files={paths['valid']}",
        f"--test_files={paths['test']}",
        f"--config_json={base}",
    ]


def test_default_search_space_is_pinned():
    assert hypermodel_lib.SEARCH_SPACE == {
        "hidden_dim": (50, 400, 50, 100),
        "feature_dim": (20, 120, 10, 30),
        "order": [3, 4, 5, 6],
        "direct": [False, True],
        "shortlist": [0, 2000, 4000, 8000],
        "learning_rate": [0.5, 1, 2, 4],
    }
    model = hypermodel_lib.NPLMHyperModel(
        Config(), corpus=None, vocab_size=50, output_dir="unused", tune_order=True, tune_direct=True
    )
    hp = keras_tuner.HyperParameters()
    config = model.config(hp)
    assert (config.hidden_dim, config.feature_dim, config.order, config.direct) == (100, 30, 5, False)
    space = {p.name: p.get_config() for p in hp.space}
    assert (space["hidden_dim"]["min_value"], space["hidden_dim"]["max_value"], space["hidden_dim"]["step"]) == (
        50,
        400,
        50,
    )
    assert (space["feature_dim"]["min_value"], space["feature_dim"]["max_value"], space["feature_dim"]["step"]) == (
        20,
        120,
        10,
    )
    assert space["order"]["values"] == [3, 4, 5, 6]
    assert set(space) == {"hidden_dim", "feature_dim", "order", "direct"}


def test_a_searched_full_softmax_drops_the_tail_the_short_lists_use(tmp_path):
    """A base of N > 0 sets the lists' tail; its N = 0 trials were invalid configs ("tail='network' needs
    shortlist > 0"), failed trials that keras-tuner skipped or that stopped the search."""
    base = Config(shortlist=4000, tail="backoff", tail_ngram_order=3, tail_ngram_prune="0,0,1")
    model = hypermodel_lib.NPLMHyperModel(
        base, corpus=None, vocab_size=14_118, output_dir="unused", tune_shortlist=True
    )
    for size in (0, 2000, 8000):
        hp = keras_tuner.HyperParameters()
        hp.Choice("shortlist", hypermodel_lib.SEARCH_SPACE["shortlist"], default=0)
        hp.values["shortlist"] = size
        config = model.config(hp)
        expected = ("class", 0, "") if size == 0 else ("backoff", 3, "0,0,1")
        assert (config.shortlist, config.tail, config.tail_ngram_order, config.tail_ngram_prune) == (size, *expected)
        row = {"hidden_dim": 100, "feature_dim": 30, "order": 5, "direct": False, "shortlist": size}
        best = search_lib.best_config([row], base)  # best_config.json: once the same ConfigError, at the end
        assert (best.shortlist, best.tail, best.tail_ngram_order, best.tail_ngram_prune) == (size, *expected)
    rows = [
        {**row, "trial": str(i), "shortlist": n, "epochs": 1, "valid_perplexity": 9.0 + i, "test_perplexity": 9.5}
        for i, n in enumerate((2000, 0))
    ]
    search_lib.write_results(str(tmp_path), [{**r, "seconds": 3.0} for r in rows], base, "random")
    table = (tmp_path / "results.md").read_text()
    assert (
        "| 0 | 100 | 30 | 5 | no | 2,000 (backoff tail) | 0.001 | 1 |" in table
        and "| 1 | 100 | 30 | 5 | no | all | 0.001 | 1 |" in table
    )
    small = hypermodel_lib.NPLMHyperModel(base, corpus=None, vocab_size=3_000, output_dir="unused", tune_shortlist=True)
    hp = keras_tuner.HyperParameters()
    small.config(hp)
    assert hp.space[-1].get_config()["values"] == [0, 2000]  # sizes not below |V| left out


def test_the_learning_rate_is_searched_as_multiples_of_the_base_and_reaches_the_best_config(tmp_path):
    assert hypermodel_lib.learning_rates(1e-3) == [0.0005, 0.001, 0.002, 0.004]
    base = Config(optimizer="sgd", learning_rate=0.03)
    model = hypermodel_lib.NPLMHyperModel(
        base, corpus=None, vocab_size=50, output_dir="unused", tune_learning_rate=True
    )
    hp = keras_tuner.HyperParameters()
    assert model.config(hp).learning_rate == 0.03  # the default trial is the base
    assert hp.space[-1].get_config()["values"] == [0.015, 0.03, 0.06, 0.12]
    hp.values["learning_rate"] = 0.12
    tried = model.config(hp)
    assert (tried.learning_rate, tried.optimizer) == (0.12, "sgd")
    assert hypermodel_lib.run_dir("out", tried) != hypermodel_lib.run_dir("out", base)  # its own run directory
    row = {"hidden_dim": 100, "feature_dim": 30, "order": 5, "direct": False, "shortlist": 0, "learning_rate": 0.12}
    assert search_lib.best_config([row], base).learning_rate == 0.12
    rows = [{**row, "trial": "0", "epochs": 1, "valid_perplexity": 9.0, "test_perplexity": 9.5, "seconds": 3.0}]
    search_lib.write_results(str(tmp_path), rows, base, "random")
    assert "| 0 | 100 | 30 | 5 | no | all | 0.12 | 1 | 9.00 | 9.50 | 3 |" in (tmp_path / "results.md").read_text()


def test_a_sampled_loss_cannot_search_short_lists(corpus, tmp_path):
    config = tmp_path / "nce.json"
    config.write_text(json.dumps({**helpers.tiny_config(epochs=1).to_dict(), "loss": "nce", "num_sampled": 6}))
    out = tmp_path / "search"
    result = helpers.run_binary(
        "tuning.search", f"--output_dir={out}", *corpus, f"--config_json={config}", "--tune_shortlist"
    )
    helpers.assert_one_sentence(
        result,
        "--tune_shortlist searches short lists, which train with the softmax, but the config's loss='nce' trains "
        "the full vocabulary by sampling; drop one of the two.",
    )
    assert not out.exists()


def test_random_search_under_mirrored_strategy_writes_results_and_resumes(corpus, tmp_path):
    out = str(tmp_path / "search")
    args = [f"--output_dir={out}", "--max_trials=2", "--epochs_per_trial=1", "--num_cpu_devices=2", *corpus]
    args.append("--tune_learning_rate")
    result = helpers.run_binary("tuning.search", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("on 2 replica(s)") == 2  # each trial ran under MirroredStrategy, 2 CPU replicas
    for name in ("results.json", "results.md", "results.png", "best_config.json"):
        assert os.path.isfile(os.path.join(out, name)), name
    rows = json.load(open(os.path.join(out, "results.json")))["trials"]
    assert len(rows) == 2 and rows[0]["valid_perplexity"] <= rows[1]["valid_perplexity"]
    rates = hypermodel_lib.learning_rates(helpers.tiny_config().learning_rate)
    for row in rows:
        assert 50 <= row["hidden_dim"] <= 400 and 20 <= row["feature_dim"] <= 120 and row["seconds"] > 0
        assert row["learning_rate"] in rates
    space = json.load(open(os.path.join(out, "search", "oracle.json")))["hyperparameters"]["space"]
    assert {p["config"]["name"] for p in space} == {"hidden_dim", "feature_dim", "learning_rate"}
    best = Config.from_json(os.path.join(out, "best_config.json"))
    assert (best.hidden_dim, best.feature_dim, best.learning_rate) == (
        rows[0]["hidden_dim"],
        rows[0]["feature_dim"],
        rows[0]["learning_rate"],
    )
    assert open(os.path.join(out, "results.png"), "rb").read(8) == b"\x89PNG\r\n\x1a\n"

    open(os.path.join(out, "search", "tuner0.json"), "w").close()  # killed as keras-tuner wrote it: written again
    again = helpers.run_binary("tuning.search", *args)  # resumes: the oracle has its 2 trials, nothing trains
    assert again.returncode == 0, again.stderr[-3000:]
    assert "tuner0.json was cut short when the search was stopped; written again" in again.stdout
    assert "Reloading Tuner" in again.stdout + again.stderr and "training" not in again.stdout
    assert json.loads(again.stdout.strip().splitlines()[-1])["best_trial"] == rows[0]["trial"]
    # Stopped as keras-tuner wrote its state in place (the oracle's file emptied, a trial's cut short): the search
    # starts over and reads the finished runs back (once a JSONDecodeError traceback).
    open(os.path.join(out, "search", "oracle.json"), "w").close()
    trial_file = os.path.join(out, "search", "trial_0", "trial.json")
    text = open(trial_file).read()
    open(trial_file, "w").write(text[: len(text) // 2])
    mended = helpers.run_binary("tuning.search", *args)
    assert mended.returncode == 0, mended.stderr[-3000:]
    assert "oracle.json was cut short when the search was stopped; the search starts over" in mended.stdout
    assert "training" not in mended.stdout and mended.stdout.count("already holds a finished run") == 2
    assert json.loads(mended.stdout.strip().splitlines()[-1])["best_trial"] == rows[0]["trial"]
    report = helpers.run_binary(
        "tuning.search", *[a.replace("--max_trials=2", "--max_trials=5") for a in args], "--report_only"
    )  # a larger budget, but only the finished trials are reported
    assert report.returncode == 0, report.stderr[-3000:]
    assert "training" not in report.stdout and json.loads(report.stdout.strip().splitlines()[-1])["trials"] == 2

    trained = helpers.run_binary(
        "nplm_tf.train",
        f"--model_dir={tmp_path / 'best'}",
        f"--config_json={os.path.join(out, 'best_config.json')}",
        "--noexport",
        *corpus[:4],
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    metrics = json.load(open(tmp_path / "best" / "metrics.json"))
    assert metrics["config"]["hidden_dim"] == best.hidden_dim and metrics["config"]["feature_dim"] == best.feature_dim
    assert metrics["config"]["learning_rate"] == best.learning_rate


def test_chief_and_worker_finish_a_search_and_a_killed_worker_loses_nothing(corpus, tmp_path):
    out = str(tmp_path / "dist")
    env = dict(KERASTUNER_ORACLE_IP="127.0.0.1", KERASTUNER_ORACLE_PORT=str(strategies.loopback_ports(1)[0]))
    args = [
        f"--output_dir={out}",
        "--max_trials=3",
        "--epochs_per_trial=1",
        "--num_cpu_devices=1",
        *corpus,
    ]

    def start(role):
        return helpers.start_binary("tuning.search", *args, env=dict(env, KERASTUNER_TUNER_ID=role))

    chief = start("chief")
    worker = start("tuner0")
    try:
        deadline = time.time() + 240
        while not glob.glob(os.path.join(out, "runs", "*", "metrics.json")):  # the first trial is done
            assert time.time() < deadline and worker.poll() is None, "no trial finished"
            time.sleep(0.2)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
        first = glob.glob(os.path.join(out, "runs", "*", "metrics.json"))[0]
        stamp = os.path.getmtime(first)
        # Killed as keras-tuner wrote the worker's state in place (once a traceback on the restarted worker, and
        # the chief waited for it for ever).
        open(os.path.join(out, "search", "tuner0.json"), "w").close()
        worker = start("tuner0")  # the same tuner id picks up where the dead one stopped
        w_out, w_err = worker.communicate(timeout=300)
        assert worker.returncode == 0, w_err[-3000:]
        assert "tuner0.json was cut short when the search was stopped; written again (it holds no state)." in w_out
        c_out, c_err = chief.communicate(timeout=120)
    finally:
        for p in (chief, worker):
            if p.poll() is None:
                p.kill()
    assert chief.returncode == 0, c_err[-3000:]
    chief_report = json.loads(c_out.strip().splitlines()[-1])
    worker_report = json.loads(w_out.strip().splitlines()[-1])
    assert chief_report["role"] == "chief" and worker_report["role"] == "tuner0"
    assert chief_report["best_trial"] == worker_report["best_trial"]
    assert chief_report["trials"] == 3
    assert os.path.getmtime(first) == stamp  # the finished trial was not trained again


def test_state_cut_short_is_mended_where_it_lives(tmp_path):
    """keras-tuner writes its JSON in place: a file cut short by a kill is written again (the tuner's, which holds
    no state) or starts the search over (the oracle's, where the oracle lives); a worker leaves the chief's alone."""
    project = tmp_path / search_lib.PROJECT
    (project / "trial_0").mkdir(parents=True)
    whole = {"oracle.json": "{}", "trial_0/trial.json": '{"trial_id": "0"}', "tuner0.json": "{}", "chief.json": "{}"}
    for name, text in whole.items():
        (project / name).write_text(text)
    assert search_lib.mend_cut_short_state(str(tmp_path), "tuner0", holds_oracle=True) is None
    (project / "tuner0.json").write_text("")
    (project / "trial_0/trial.json").write_text('{"trial_')
    note = search_lib.mend_cut_short_state(str(tmp_path), "tuner0", holds_oracle=False)  # a worker
    assert note.endswith("tuner0.json was cut short when the search was stopped; written again (it holds no state).")
    assert (project / "tuner0.json").read_text() == "{}" and (project / "oracle.json").exists()
    with pytest.raises(ConfigError, match="trial.json was cut short .*; run the search without --report_only"):
        search_lib.mend_cut_short_state(str(tmp_path), "chief", holds_oracle=True, report_only=True)
    assert (project / "oracle.json").exists() and (project / "chief.json").exists()  # nothing removed
    note = search_lib.mend_cut_short_state(str(tmp_path), "chief", holds_oracle=True)  # the chief
    assert "trial_0/trial.json was cut short when the search was stopped; the search starts over" in note
    assert not (project / "oracle.json").exists() and not (project / "chief.json").exists()
    assert (project / "trial_0/trial.json").exists()  # written again by the new oracle


CHIEF = {"KERASTUNER_TUNER_ID": "chief", "KERASTUNER_ORACLE_IP": "127.0.0.1"}


@pytest.mark.parametrize(
    "flag,env,message",
    [
        ("--max_trials=0", {}, "max_trials=0 and epochs_per_trial=2 must be at least 1"),
        ("--epochs_per_trial=0", {}, "epochs_per_trial=0 must be at least 1"),
        ("--num_cpu_devices=0", {}, "num_cpu_devices=0 must be at least 1"),
        # every trial failed in Keras's fit (an AddN shape error), three in a row ending the search
        ("--num_cpu_devices=3", {}, "batch_size=16 does not split evenly over the 3 replicas of a mirrored strategy"),
        # once a traceback from gRPC or keras-tuner, after the data was read and the output directory made
        (
            "--seed=1",
            {**CHIEF, "KERASTUNER_ORACLE_PORT": "abc"},
            "KERASTUNER_ORACLE_PORT='abc' must be the chief's port",
        ),
        ("--seed=1", {**CHIEF, "KERASTUNER_ORACLE_PORT": "70000"}, "an integer in [1, 65535]"),
        (
            "--seed=1",
            {"KERASTUNER_ORACLE_IP": "127.0.0.1", "KERASTUNER_ORACLE_PORT": "8000"},
            "a distributed search needs KERASTUNER_ORACLE_IP (the chief's address) and KERASTUNER_TUNER_ID",
        ),
        ("--seed=1", {"KERASTUNER_ORACLE_PORT": "8000"}, "KERASTUNER_ORACLE_PORT is set without KERASTUNER_ORACLE_IP"),
    ],
)
def test_bad_flags_are_one_sentence_and_leave_the_output_alone(flag, env, message, corpus, tmp_path):
    out = tmp_path / "search"
    out.mkdir()
    (out / "results.md").write_text("earlier results\n")
    result = helpers.run_binary("tuning.search", f"--output_dir={out}", *corpus, flag, env=env)
    assert "Traceback" not in result.stderr
    helpers.assert_one_sentence(result, message)
    assert (out / "results.md").read_text() == "earlier results\n"


def test_bad_data_is_one_sentence_before_tensorflow_loads(corpus, tmp_path):
    empty = helpers.write_lines(str(tmp_path / "empty.txt"), [""])
    out = tmp_path / "search"
    flags = [f"--output_dir={out}", *corpus, f"--train_files={empty}"]
    result = helpers.run_binary("tuning.search", *flags, env=helpers.without_tensorflow(tmp_path))
    helpers.assert_one_sentence(result, "empty.txt is empty")
    assert not out.exists()


def test_the_bayesian_tuner_without_scikit_learn_is_one_sentence(corpus, tmp_path):
    """keras-tuner imports scikit-learn only when its BayesianOptimization is built, after the data is read."""
    package = tmp_path / "no_sklearn" / "sklearn"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('raise ImportError("no scikit-learn here", name="sklearn")\n')
    out = tmp_path / "search"
    result = helpers.run_binary(
        "tuning.search", f"--output_dir={out}", *corpus, "--tuner=bayesian", env={"PYTHONPATH": str(package.parent)}
    )
    helpers.assert_one_sentence(
        result,
        "--tuner=bayesian needs scikit-learn and scipy, and sklearn did not import: "
        "pip install 'keras-tuner[bayesian]==1.4.8'.",
    )
    assert not out.exists()


@pytest.mark.parametrize("tuner", ["bayesian", "hyperband"])
def test_the_other_tuners_finish_a_search_with_the_learning_rate(tuner, corpus, tmp_path):
    """Bayesian optimization needs scikit-learn and scipy (setup.py installs them); both tuners read the
    searched ε_0 back into the results."""
    out = tmp_path / tuner
    flags = ["--max_trials=2", "--epochs_per_trial=2", "--tune_learning_rate"]
    result = helpers.run_binary("tuning.search", f"--output_dir={out}", f"--tuner={tuner}", *flags, *corpus)
    assert result.returncode == 0, result.stderr[-3000:]
    # By default each trial trains on one CPU replica: two on a 2-core CPU ran at about half its tokens/s.
    assert result.stdout.count("replica(s)") == result.stdout.count("on 1 replica(s)") > 0
    rows = json.load(open(out / "results.json"))["trials"]
    rates = hypermodel_lib.learning_rates(helpers.tiny_config().learning_rate)
    assert rows and all(row["learning_rate"] in rates for row in rows)
    assert (out / "results.md").read_text().startswith(f"# {tuner} search: {len(rows)} trials")
    assert Config.from_json(str(out / "best_config.json")).learning_rate == rows[0]["learning_rate"]


def test_a_config_of_local_sgd_is_refused_before_the_search(corpus, tmp_path):
    """Its trials each train in one process: sync_every was ignored, and `train` refused the best_config.json."""
    base = tmp_path / "local_sgd.json"
    base.write_text(json.dumps({"sync_every": 3}))
    result = helpers.run_binary(
        "tuning.search", f"--output_dir={tmp_path / 'search'}", *corpus, f"--config_json={base}"
    )
    helpers.assert_one_sentence(result, "sync_every=3 needs --strategy=multi_worker (other strategies all-reduce")
    assert not (tmp_path / "search").exists()


def test_a_trial_that_diverges_fails_with_its_reason_instead_of_ranking_a_nan(corpus, tmp_path):
    """Before, keras-tuner dropped a diverged trial without a word (a NaN objective makes a trial invalid), or it
    failed on an OverflowError; three in a row ended the search with a RuntimeError traceback."""
    base = tmp_path / "diverging.json"
    base.write_text(json.dumps(helpers.tiny_config(epochs=1).replace(learning_rate=1e30, optimizer="sgd").to_dict()))
    flags = [*corpus[:-1], f"--config_json={base}"]
    result = helpers.run_binary("tuning.search", f"--output_dir={tmp_path / 'search'}", "--max_trials=2", *flags)
    assert result.stdout.count("failed: training diverged in epoch 1 (") == 2, result.stdout[-3000:]
    helpers.assert_one_sentence(result, "the search finished no trial; see the errors above")
    # keras-tuner stops a search at its third failed trial in a row (it still prints each failed trial's traceback).
    result = helpers.run_binary("tuning.search", f"--output_dir={tmp_path / 'three'}", "--max_trials=4", *flags)
    assert "RuntimeError" not in result.stderr
    helpers.assert_one_sentence(
        result, "the search stopped after 3 failed trials in a row; the last: training diverged in epoch 1 ("
    )


def test_the_hyperband_plan_is_keras_tuners():
    """The configurations a Hyperband search tries, as search says before it starts (--max_trials does not bound
    it, and the default 2 epochs per trial try 2), equal what keras-tuner's oracle plans."""
    from keras_tuner.src.tuners.hyperband import HyperbandOracle

    for max_epochs in range(1, 40):
        oracle = HyperbandOracle(objective="val_loss", max_epochs=max_epochs, factor=search_lib.HYPERBAND_FACTOR)
        brackets = oracle._get_num_brackets()
        assert search_lib.hyperband_plan(max_epochs) == (brackets, sum(oracle._get_size(b, 0) for b in range(brackets)))
    assert search_lib.hyperband_note(2) == (
        "note: hyperband with --epochs_per_trial=2 tries 2 configurations in 1 bracket (--max_trials bounds random "
        "and bayesian only); with one bracket none is stopped early: --epochs_per_trial=9 tries 17 in 3."
    )
    assert search_lib.hyperband_note(1).startswith("note: hyperband with --epochs_per_trial=1 tries 1 configuration in")
    assert search_lib.hyperband_note(27).startswith(
        "note: hyperband with --epochs_per_trial=27 tries 49 configurations"
    )
