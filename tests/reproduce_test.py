"""The Table 1 reproduction binary, in its quick mode on a tiny corpus, and its resume."""

import json
import math
import os

import pytest

from nplm_tf.experiments import table1
from pipelines.errors import UserError
from tests import helpers


def test_quick_reproduce_writes_the_table_and_resumes(tmp_path):
    paths = helpers.tiny_corpus_files(tmp_path, train=50, valid=10, test=10)
    base = tmp_path / "base.json"
    base.write_text(json.dumps(helpers.tiny_config().to_dict()))
    out = str(tmp_path / "table1")
    args = [
        f"--output={out}",
        "--quick",
        f"--config_json={base}",
        "--corpus=files",
        f"--train_files={paths['train']}",
        f"--valid_files={paths['valid']}",
        f"--test_files={paths['test']}",
    ]
    first = helpers.run_binary("nplm_tf.reproduce", *args)
    assert first.returncode == 0, first.stderr[-3000:]
    table = json.load(open(os.path.join(out, "table.json")))
    names = [r["name"] for r in table["rows"]]
    assert names == ["MLP7", "MLP8", "MLP9", "MLP10", "interpolated trigram", "Kneser-Ney 3-gram", "Kneser-Ney 5-gram"]
    rows = {r["name"]: r for r in table["rows"]}
    assert (rows["MLP7"]["n"], rows["MLP7"]["h"], rows["MLP7"]["m"], rows["MLP7"]["direct"]) == (3, 50, 30, True)
    assert rows["Kneser-Ney 5-gram"]["ratio_to_kn5"] == 1.0
    assert rows["Kneser-Ney 5-gram"]["ratio_to_kn5_95"] == [1.0, 1.0]
    for r in table["rows"]:  # every row's interval against KN5, from the per-token files the rows keep
        low, high = r["ratio_to_kn5_95"]
        assert low <= r["ratio_to_kn5"] <= high, r["name"]
        assert low < high or r["name"] == "Kneser-Ney 5-gram", r["name"]
    for r in table["rows"]:
        assert 1 < r["test"] < 20 and r["valid"] > 1  # a 20-word vocabulary
    # Mixing with the trigram never does worse on valid, where its weights were fitted.
    assert rows["MLP10"]["valid"] <= min(rows["MLP9"]["valid"], rows["interpolated trigram"]["valid"]) + 1e-9
    md = open(os.path.join(out, "table.md")).read()
    assert md.count("\n| MLP") == 4 and "| 276 |" in md and "| 252 |" in md
    assert f"| {rows['MLP9']['ratio_to_kn5']:.3f} ({rows['MLP9']['ratio_to_kn5_95'][0]:.3f}–" in md
    assert open(os.path.join(out, "curves.png"), "rb").read(4) == b"\x89PNG"
    assert len(rows["MLP9"]["curve"]) == 1

    again = helpers.run_binary("nplm_tf.reproduce", *args)  # every row is finished: nothing trains again
    assert again.returncode == 0, again.stderr[-3000:]
    assert "training" not in again.stdout
    assert [r["test"] for r in json.load(open(os.path.join(out, "table.json")))["rows"]] == [
        r["test"] for r in table["rows"]
    ]

    # A second seed: only its runs train (the config's own seed's are the rows above), and each network row
    # becomes the two runs' geometric mean, its interval resampling the runs.
    seed = helpers.tiny_config().seed
    seeded = helpers.run_binary("nplm_tf.reproduce", *args, f"--seeds={seed},{seed + 1}")
    assert seeded.returncode == 0, seeded.stderr[-3000:]
    assert sum(line.startswith("training ") for line in seeded.stdout.splitlines()) == 2  # MLP7 and MLP9
    assert os.path.isdir(os.path.join(out, f"mlp9_seed{seed + 1}"))
    pooled = {r["name"]: r for r in json.load(open(os.path.join(out, "table.json")))["rows"]}
    for name in ("MLP7", "MLP8", "MLP9", "MLP10"):
        r = pooled[name]
        assert r["seeds"] == [seed, seed + 1] and r["test_runs"][0] == rows[name]["test"]
        assert r["test_runs"][1] != r["test_runs"][0]
        assert r["test"] == pytest.approx(math.sqrt(r["test_runs"][0] * r["test_runs"][1]))
        low, high = r["ratio_to_kn5_95"]
        assert low <= r["ratio_to_kn5"] <= high
    assert pooled["Kneser-Ney 5-gram"] == rows["Kneser-Ney 5-gram"]
    assert "Network rows: the geometric mean of 2 runs, seeds" in open(os.path.join(out, "table.md")).read()


def test_the_rows_are_the_papers_shapes():
    shapes = {r.name: (r.order, r.hidden_dim, r.feature_dim, r.direct) for r in table1.ROWS}
    assert shapes == {
        "MLP1": (5, 50, 60, True),
        "MLP3": (5, 0, 60, True),
        "MLP5": (5, 50, 30, True),
        "MLP7": (3, 50, 30, True),
        "MLP9": (5, 100, 30, False),
    }


@pytest.mark.parametrize(
    "case",
    [
        "zero_epochs",
        "config_not_utf8",
        "config_not_object",
        "config_wrong_type",
        "missing_train",
        "seeds_not_numbers",
        "seed_twice",
        "seed_out_of_range",
    ],
)
def test_bad_input_is_one_sentence_and_leaves_the_output_alone(case, tmp_path):
    paths = helpers.tiny_corpus_files(tmp_path, train=20, valid=5, test=5)
    config = tmp_path / "base.json"
    config.write_text(json.dumps(helpers.tiny_config().to_dict()))
    out = tmp_path / "table1"
    out.mkdir()
    (out / "table.md").write_text("an earlier table\n")
    corpus = [
        "--corpus=files",
        f"--train_files={paths['train']}",
        f"--valid_files={paths['valid']}",
        f"--test_files={paths['test']}",
    ]
    flags, message = {
        "zero_epochs": (["--epochs=0"], "epochs=0 must be at least 1"),
        "config_not_utf8": (["--config_json=" + _write(tmp_path / "c.json", b'{"order": \xff}')], "is not UTF-8"),
        "config_not_object": (["--config_json=" + _write(tmp_path / "list.json", b"[5]")], "one JSON object"),
        "config_wrong_type": (
            ["--config_json=" + _write(tmp_path / "t.json", b'{"hidden_dim": "100"}')],
            "hidden_dim='100' must be an integer.",
        ),
        "missing_train": (["--train_files=" + str(tmp_path / "nowhere.txt")], "nowhere.txt"),
        "seeds_not_numbers": (["--seeds=1,x"], "--seeds=1,x must be comma-separated whole numbers."),
        "seed_twice": (["--seeds=1,2,1"], "--seeds=1,2,1 names a seed twice."),
        "seed_out_of_range": (["--seeds=1,-1"], "seed=-1 must be in [0, 2**32 - 1]"),
    }[case]
    if not case.startswith("config_"):
        flags = [f"--config_json={config}", *flags]
    result = helpers.run_binary("nplm_tf.reproduce", f"--output={out}", "--quick", *corpus, *flags)
    assert "Traceback" not in result.stderr
    helpers.assert_one_sentence(result, message)
    assert (out / "table.md").read_text() == "an earlier table\n"


def _write(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def test_the_best_recipe_trains_its_ensemble_mixes_it_and_resumes(tmp_path):
    from nplm_tf.experiments import best
    from nplm_tf.tools import ensemble
    from pipelines import per_token

    paths = helpers.tiny_corpus_files(tmp_path, train=50, valid=10, test=10)
    base = tmp_path / "base.json"
    base.write_text(json.dumps(helpers.tiny_config().to_dict()))
    out = str(tmp_path / "best")
    args = [f"--output={out}", "--best", "--quick", f"--config_json={base}", *helpers.files_flags(paths)]
    first = helpers.run_binary("nplm_tf.reproduce", *args)
    assert first.returncode == 0, first.stderr[-3000:]
    result = json.load(open(os.path.join(out, "best.json")))
    rows = {r["name"]: r for r in result["rows"]}
    names = [name for name, _ in best.MEMBERS]
    ensembles = [
        "ensemble of the networks",
        "the networks and KN5",
        "KN5 and the cache",
        "the networks, KN5 and the cache",
    ]
    assert list(rows) == [*names, *ensembles, "Kneser-Ney 5-gram"]
    for name, changes in best.MEMBERS:  # each member is the recipe's configuration with its own changes
        config = json.load(open(os.path.join(out, name, "config.json")))
        expected = {**helpers.tiny_config().to_dict(), "epochs": 1, **changes}
        assert {k: config[k] for k in expected} == expected, name
    for r in rows.values():  # each row's figure is its per-token file's (a network's from NumPy), and its
        _, ln_p, _ = per_token.read(r["test_tokens"], "test_tokens")  # interval holds the ratio
        assert r["test"] == pytest.approx(math.exp(-ln_p.mean()), rel=1e-6), r["name"]
        low, high = r["ratio_to_kn5_95"]
        assert low <= r["ratio_to_kn5"] <= high, r["name"]
    assert sum(rows["ensemble of the networks"]["weights"]) == pytest.approx(1.0)
    assert len(rows["the networks and KN5"]["weights"]) == len(names) + 1
    caches = len(best.CACHE_DECAYS)
    assert len(rows["KN5 and the cache"]["weights"]) == 1 + caches
    assert len(rows["the networks, KN5 and the cache"]["weights"]) == len(names) + 1 + caches
    fit, weights = ensemble.read_fit(os.path.join(out, best.ENSEMBLE_FILE))  # what export --ensemble reads
    assert [os.path.basename(d) for d in fit["model_dirs"]] == names and len(fit["ngram_dirs"]) == 1
    assert weights.shape[1] == len(names) + 1 and np_allclose_rows(weights)
    md = open(os.path.join(out, "best.md")).read()
    assert "| the networks and KN5 |" in md and "python -m nplm_tf.reproduce --output=" in md

    # After each network but the last, the time the others will take; none where nothing trains.
    assert first.stdout.count(" to go, about ") == len(names) - 1, first.stdout
    again = helpers.run_binary("nplm_tf.reproduce", *args)  # every part is finished: nothing trains again
    assert again.returncode == 0, again.stderr[-3000:]
    assert "training" not in again.stdout and " to go, about " not in again.stdout
    assert [r["test"] for r in json.load(open(os.path.join(out, "best.json")))["rows"]] == [
        r["test"] for r in result["rows"]
    ]


def test_the_recipe_foresees_the_time_left_from_the_networks_it_trained():
    from nplm_tf.experiments import best

    trained = {"name": "a", "seconds_here": 600.0, "train_seconds": 590.0}
    found = {"name": "b", "seconds_here": 2.0, "train_seconds": 700.0}  # finished on disk: only read
    assert best.remaining([trained], 3) == "a took 10.0 minutes; 3 to go, about 30 minutes more\n"
    assert best.remaining([trained, found], 2) == "b took 0.0 minutes; 2 to go, about 20 minutes more\n"
    assert best.remaining([found], 2) == "" and best.remaining([trained], 0) == ""


def np_allclose_rows(weights) -> bool:
    return all(abs(sum(row) - 1.0) < 1e-9 and min(row) >= 0 for row in weights.tolist())


def test_the_shipped_recipe_is_a_configuration_train_reads():
    from nplm_tf.core.config import Config
    from nplm_tf.experiments import recipe

    shipped = json.load(open(recipe.CONFIG, encoding="utf-8"))
    config = Config.from_json(recipe.CONFIG)  # every key a field, every value in range
    assert {k: getattr(config, k) for k in shipped} == shipped
    assert os.path.relpath(recipe.CONFIG, helpers.ROOT) == "nplm_tf/configs/brown_best.json"  # setup.py ships it


def test_the_recipe_takes_a_short_list_on_a_large_vocabulary(tmp_path):
    """`reproduce --best` chooses the head by the rule `train` follows (`run_setup.head_for_vocabulary`)."""
    from nplm_tf.core.config import Config
    from nplm_tf.experiments import recipe
    from nplm_tf.training import run_setup
    from nplm_tf.training.data import LARGE_VOCABULARY
    from pipelines import corpus as corpus_lib

    shipped = Config.from_json(recipe.CONFIG)

    def corpus(types: int) -> corpus_lib.Corpus:  # the recipe's n = 13 needs lines of 13 words or more
        return corpus_lib.files_corpus(*helpers.vocabulary_files(tmp_path, types, shipped.min_count, 20).values())

    config, note = recipe.recipe(corpus(LARGE_VOCABULARY - 2))
    assert config.shortlist == run_setup.LARGE_VOCABULARY_SHORTLIST and "short list of the 4,000" in note
    assert config.replace(shortlist=0) == shipped
    assert recipe.recipe(corpus(LARGE_VOCABULARY - 3)) == (shipped, None)


def test_a_budget_trains_the_most_valuable_networks_that_fit(tmp_path):
    """--budget: the recipe's own network first; after it, the next would not fit in a second, so the ensemble
    keeps one network, says why, and is built and mixed as with all four."""
    from nplm_tf.experiments import best

    paths = helpers.tiny_corpus_files(tmp_path, train=50, valid=10, test=10)
    base = tmp_path / "base.json"
    base.write_text(json.dumps(helpers.tiny_config().to_dict()))
    out = str(tmp_path / "best")
    args = [f"--output={out}", "--best", "--quick", f"--config_json={base}", "--budget=1s", *helpers.files_flags(paths)]
    result = helpers.run_binary("nplm_tf.reproduce", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [r["name"] for r in json.load(open(os.path.join(out, "best.json")))["rows"]]
    assert rows[:2] == [best.MEMBERS[-1][0], "ensemble of the networks"] and rows[-1] == "Kneser-Ney 5-gram"
    assert "the ensemble keeps the 1 trained" in result.stdout and "budget: 0 of 0 minutes used" in result.stdout


def test_the_recipe_refuses_a_bad_corpus_or_budget_before_tensorflow_loads(tmp_path):
    """`reproduce --best` reads the recipe and the corpus in its flag checks: one sentence, nothing written, and
    TensorFlow never imported (its start-up lines once printed before the sentence)."""
    paths = helpers.tiny_corpus_files(tmp_path, train=50, valid=10, test=10)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    no_tf = helpers.without_tensorflow(tmp_path)
    out = tmp_path / "best"
    flags = helpers.files_flags(paths)
    for given, message in (
        (["--corpus=files", f"--train_files={empty}", *flags[2:]], "empty"),
        (["--budget=2d", *flags], "--budget=2d must be a positive time with its unit"),
    ):
        result = helpers.run_binary("nplm_tf.reproduce", "--best", f"--output={out}", *given, env=no_tf)
        helpers.assert_one_sentence(result, message)
        assert not out.exists()


def test_the_budget_reads_a_time_with_its_unit_and_stops_before_a_network_that_would_not_fit():
    from nplm_tf.experiments import best, recipe

    assert [recipe.budget_seconds(t) for t in ("2h", "90m", "45min", "600s", "1.5h", None)] == [
        7200.0, 5400.0, 2700.0, 600.0, 5400.0, None
    ]  # fmt: skip
    for bad in ("90", "2d", "-1h", "0m", "infh", "h", "nanh"):
        with pytest.raises(UserError, match="must be a positive time with its unit"):
            recipe.budget_seconds(bad)
    trained = {"name": "a", "seconds_here": 600.0, "train_seconds": 590.0}
    found = {"name": "b", "seconds_here": 2.0, "train_seconds": 700.0}  # finished on disk: only read
    assert best.within_budget([], 0.0, 1.0) is None  # at least one network trains
    assert best.within_budget([trained], 700.0, 1300.0) is None  # 700 + 600 fits
    assert "the next network would take about 10 more" in best.within_budget([trained], 701.0, 1300.0)
    assert best.within_budget([found], 100.0, 101.0) is None  # nothing trained here: nothing to foresee
    assert best.within_budget([trained], 1e9, None) is None  # no budget


def test_a_budget_without_best_is_one_sentence(tmp_path):
    result = helpers.run_binary("nplm_tf.reproduce", f"--output={tmp_path / 'o'}", "--budget=2h")
    helpers.assert_one_sentence(result, "--budget is for --best")
