"""`nplm_tf.runs`: a table of model directories, read from their JSON files."""

import json

import pytest

from nplm_tf.core.config import Config
from nplm_tf.core.run_dir import RunDir
from nplm_tf.tools import run_table as runs
from tests import helpers


def _epoch(epoch, valid, seconds=10.0, rate=1000.0):
    return {"epoch": epoch, "valid_perplexity": valid, "seconds": seconds, "tokens_per_second": rate}


def _run(path, config, history=(), metrics=None, words=20):
    run = RunDir(str(path))
    path.mkdir()
    lines = ["</s>\t10\n", "<unk>\t0\n", *(f"w{i}\t{100 - i}\n" for i in range(words - 2))]  # |V| = words
    (path / "vocab.tsv").write_text("".join(lines), encoding="utf-8")
    run.write_config(config)
    run.write_corpus({"corpus": "brown"})
    if history:
        run.write_history(dict(enumerate(history)))
    if metrics is not None:
        run.write_metrics({"config": config.to_dict(), "epochs": list(history), "vocab_size": words, **metrics})
    return str(path)


@pytest.fixture
def three_runs(tmp_path):
    """A finished run, one stopped after its first epoch of three, one set up with no epoch, and a directory
    that is not a run."""
    full = _run(
        tmp_path / "full",
        Config(epochs=2),
        [_epoch(1, 200.0, 10.0, 900.0), _epoch(2, 180.0, 12.0, 1100.0)],
        {"test_perplexity": 170.5},
    )
    stopped = _run(tmp_path / "sl", Config(epochs=3, shortlist=8, seed=2), [_epoch(1, 190.0, 5.0, 3000.0)])
    new = _run(tmp_path / "new", Config(), words=5)
    (tmp_path / "logs").mkdir()
    return tmp_path, full, stopped, new


def test_each_run_is_summarized_from_its_files(three_runs):
    tmp_path, full, stopped, new = three_runs
    rows, others = runs.check_dirs(f"{tmp_path}/*")
    assert others == [str(tmp_path / "logs")]
    by_run = {row["run"]: row for row in rows}
    assert by_run[full] == {
        "run": full,
        "corpus": "brown",
        "settings": "--epochs=2",
        "status": "finished",
        "epochs": 2,
        "best": 2,
        "valid": 180.0,
        "test": 170.5,
        "|V|": 20,
        "training s": 22.0,
        "tokens/s": 1000.0,
    }
    assert by_run[stopped]["settings"] == "--epochs=3 --seed=2 --shortlist=8"
    assert (by_run[stopped]["status"], by_run[stopped]["test"], by_run[stopped]["valid"]) == (
        "epoch 1 of 3",
        None,
        190.0,
    )
    assert by_run[new]["status"] == "no epoch yet" and by_run[new]["|V|"] == 5 and by_run[new]["valid"] is None
    assert [r["run"] for r in runs.ordered(rows, "valid")] == [full, stopped, new]  # best first, none last
    assert [r["run"] for r in runs.ordered(rows, "test")] == [full, new, stopped]  # then by name
    assert [r["run"] for r in runs.ordered(rows, "name")] == sorted([full, stopped, new])


def test_a_run_continued_with_more_epochs_is_not_finished_until_its_new_metrics(tmp_path):
    path = _run(tmp_path / "run", Config(epochs=1), [_epoch(1, 200.0)], {"test_perplexity": 190.0})
    RunDir(path).write_config(Config(epochs=4))  # `train --epochs=4` on the finished run, one epoch in
    RunDir(path).write_history({0: _epoch(1, 200.0), 1: _epoch(2, 150.0)})
    (row,), _ = runs.check_dirs(path)
    assert (row["status"], row["epochs"], row["best"], row["valid"], row["test"]) == ("epoch 2 of 4", 2, 2, 150.0, None)


def test_the_three_formats(three_runs):
    tmp_path, full, stopped, new = three_runs
    rows = runs.ordered(runs.check_dirs(f"{tmp_path}/*")[0], "valid")
    markdown = runs.render(rows, "markdown").splitlines()
    assert markdown[0].startswith("| run | corpus | settings | status |") and "\\|V\\|" in markdown[0]
    assert markdown[2] == f"| {full} | brown | --epochs=2 | finished | 2 | 2 | 180.00 | 170.50 | 20 | 22 | 1,000 |"
    assert all(line.count(" | ") == len(runs.COLUMNS) - 1 for line in markdown)
    tsv = [line.split("\t") for line in runs.render(rows, "tsv").splitlines()]
    assert tsv[0] == list(runs.COLUMNS) and tsv[3][:4] == [new, "brown", "", "no epoch yet"]
    assert json.loads(runs.render(rows, "json")) == rows


def test_the_binary_answers_without_tensorflow_and_refuses_bad_input_in_one_sentence(three_runs):
    tmp_path, full, stopped, new = three_runs
    env = helpers.without_tensorflow(tmp_path / "elsewhere")

    def table(*args):
        return helpers.run_binary("nplm_tf.runs", *args, env=env, timeout=120)

    ran = table(f"--model_dirs={tmp_path}/*", "--format=tsv")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert [line.split("\t")[0] for line in ran.stdout.splitlines()] == ["run", full, stopped, new]
    assert f"note: left out 2 directories without config.json: {tmp_path}/elsewhere, {tmp_path}/logs" in ran.stderr
    ran = table(f"--model_dirs={full}, {full}/", "--format=json")  # the same directory twice is one row
    assert ran.returncode == 0 and [r["run"] for r in json.loads(ran.stdout)] == [full]
    (tmp_path / "sl" / "history.json").write_text("{not json", encoding="utf-8")
    for args, message in [
        ([f"--model_dirs={tmp_path}/nothing*"], "--model_dirs: no directory matches"),
        ([f"--model_dirs={tmp_path}/logs"], "matches no model directory (one holding config.json"),
        ([f"--model_dirs={stopped}"], f"{stopped}/history.json is not valid JSON"),
        (["--model_dirs= ,"], "--model_dirs is empty"),
        ([f"--model_dirs={full}", "--sort=perplexity"], "--sort"),
    ]:
        ran = table(*args)
        helpers.assert_one_sentence(ran, message)
        assert ran.stdout == ""


def test_curves_and_their_labels(three_runs):
    tmp_path, full, stopped, new = three_runs
    assert runs.curve(full) == [(1, 10.0, 200.0), (2, 22.0, 180.0)]  # seconds summed over the epochs
    assert runs.curve(new) == []
    assert runs.labels(["runs/sl", "runs/full"]) == ["sl", "full"]
    assert runs.labels(["a/s2/sl", "a/s3/sl", "a/s3/full/"]) == ["s2/sl", "s3/sl", "s3/full"]
    assert runs.labels(["sl", "./sl"]) == ["sl", "sl"]  # the same name: nothing tells them apart


def test_the_figure_draws_each_run_with_an_epoch(three_runs):
    from matplotlib import pyplot as plt

    tmp_path, full, stopped, new = three_runs
    rows = runs.ordered(runs.check_dirs(f"{tmp_path}/*")[0], "valid")
    fig, drawn = runs.figure(rows)
    try:
        by_epoch, by_time = fig.axes
        assert drawn == 2
        assert [t.get_text() for t in by_epoch.get_legend().get_texts()] == ["full (test 170.50)", "sl"]
        curves = [line for line in by_epoch.get_lines() if line.get_label() in ("full (test 170.50)", "sl")]
        assert [list(line.get_xdata()) for line in curves] == [[1, 2], [1]]
        assert [list(line.get_ydata()) for line in curves] == [[200.0, 180.0], [190.0]]
        times = [line for line in by_time.get_lines() if line.get_marker() == "."]  # the curves, not the circles
        assert [list(line.get_xdata()) for line in times] == [[10.0, 22.0], [5.0]]
        circles = [(list(line.get_xdata()), list(line.get_ydata())) for line in by_epoch.get_lines()[1::2]]
        assert circles == [([2], [180.0]), ([1], [190.0])]  # each run's best epoch
    finally:
        plt.close(fig)


def test_the_binary_plots_and_refuses_a_bad_plot_path_before_writing(three_runs):
    tmp_path, full, stopped, new = three_runs
    env = helpers.without_tensorflow(tmp_path / "elsewhere")
    target = tmp_path / "curves.png"
    ran = helpers.run_binary("nplm_tf.runs", f"--model_dirs={full},{stopped},{new}", f"--plot={target}", env=env)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert f"note: {target}: the learning curves of 2 of the 3 runs" in ran.stderr
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []
    before = target.read_bytes()
    for plot, message in [
        (tmp_path / "curves.jpg", "must end in .png, .pdf or .svg"),
        (tmp_path / "missing" / "c.png", "does not exist; create it first"),
        (tmp_path / "sl", "is a directory; give a file name"),
    ]:
        ran = helpers.run_binary("nplm_tf.runs", f"--model_dirs={full}", f"--plot={plot}", env=env)
        helpers.assert_one_sentence(ran, message)
        assert ran.stdout == ""
    ran = helpers.run_binary("nplm_tf.runs", f"--model_dirs={tmp_path}/none*", f"--plot={target}", env=env)
    helpers.assert_one_sentence(ran, "--model_dirs: no directory matches")
    assert target.read_bytes() == before and not (tmp_path / "curves.jpg").exists()
