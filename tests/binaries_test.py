"""The real absl binaries, run as a user would run them."""

import errno
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests import helpers

TINY = helpers.TINY_FLAGS


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    paths = helpers.tiny_corpus_files(root)
    return root, [
        "--corpus=files",
        f"--train_files={paths['train']}",
        f"--valid_files={paths['valid']}",
        f"--test_files={paths['test']}",
    ]


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    model_dir = str(tmp_path_factory.mktemp("run") / "model")
    result = helpers.run_binary("nplm_tf.train", f"--model_dir={model_dir}", "--epochs=2", *TINY, *data[1])
    assert result.returncode == 0, result.stderr[-3000:]
    return model_dir, json.loads(result.stdout.strip().splitlines()[-1])


def test_train_binary_writes_metrics(trained):
    model_dir, printed = trained
    with open(os.path.join(model_dir, "metrics.json")) as f:
        metrics = json.load(f)
    assert printed["test_perplexity"] == metrics["test_perplexity"]
    assert len(metrics["epochs"]) == 2 and metrics["config"]["hidden_dim"] == 16
    for name in ("config.json", "vocab.tsv", "history.json", "best.weights.h5", "model.keras", "logs", "backup"):
        assert os.path.exists(os.path.join(model_dir, name)), name


def test_a_finished_run_run_again_prints_its_metrics_without_loading_tensorflow(trained, data, tmp_path):
    model_dir, printed = trained
    flags = [f"--model_dir={model_dir}", "--epochs=2", *TINY, *data[1]]
    again = helpers.run_binary("nplm_tf.train", *flags, env=helpers.without_tensorflow(tmp_path))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already holds a finished run with this config" in again.stdout
    assert json.loads(again.stdout.strip().splitlines()[-1]) == printed
    # benchmarks.brown runs train's own run from the same flags: the finished run's figures, also without it
    timed = helpers.run_binary("benchmarks.brown", *flags, env=helpers.without_tensorflow(tmp_path))
    assert timed.returncode == 0, timed.stderr[-3000:]
    assert json.loads(timed.stdout.strip().splitlines()[-1])["test_perplexity"] == round(printed["test_perplexity"], 2)


def test_evaluate_binary_matches_training_and_writes_per_token(trained, data, tmp_path):
    model_dir, printed = trained
    per_token = str(tmp_path / "tokens.tsv")
    test_file = data[1][3].split("=", 1)[1]
    result = helpers.run_binary(
        "nplm_tf.evaluate", f"--model_dir={model_dir}", f"--files={test_file}", f"--per_token={per_token}"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["perplexity"] == pytest.approx(printed["test_perplexity"], rel=1e-6)
    assert out["tokens"] == printed["tokens"]["test"] and out["oov_rate"] == 0.0
    rows = [line.split("\t") for line in open(per_token, encoding="utf-8").read().splitlines()]
    assert len(rows) == out["tokens"]
    assert rows[-1][0] == "</s>"
    ln = [float(r[1]) for r in rows]
    assert math.exp(-sum(ln) / len(ln)) == pytest.approx(out["perplexity"], rel=1e-5)
    assert all(float(r[2]) == pytest.approx(float(r[1]) / math.log(10), abs=2e-6) for r in rows)
    assert os.listdir(tmp_path) == ["tokens.tsv"]  # written under a temporary name, renamed when complete


def test_evaluate_shows_progress_on_stderr_when_asked(trained, data, tmp_path):
    import re

    model_dir, printed = trained
    ngram = helpers.run_binary("nplm_tf.ngram", f"--output={tmp_path / 'kn'}", "--order=2", *data[1])
    assert ngram.returncode == 0, ngram.stderr[-3000:]
    batches = {-(-printed["tokens"][name] // 1024) for name in ("test", "valid")}  # EVAL_BATCH_SIZE
    base = ["nplm_tf.evaluate", f"--model_dir={model_dir}", f"--ngram_dir={tmp_path / 'kn'}"]
    shown = helpers.run_binary(*base, "--progress")
    quiet = helpers.run_binary(*base)  # stderr is a pipe: no bar
    for result in (shown, quiet):
        assert result.returncode == 0, result.stderr[-3000:]
        assert json.loads(result.stdout) == json.loads(quiet.stdout)  # stdout: the one JSON line
    # One finished bar for the scored split (test), one for the mixture's valid split.
    bars = [re.sub(r"\x1b\[[0-9;]*m", "", line).split("\r")[-1] for line in shown.stderr.splitlines()]
    done = [m[1] for line in bars if (m := re.match(r"(\d+)/\1 \S+ \d+s \d+m?s/batch$", line))]
    assert len(done) == 2 and set(map(int, done)) == batches, shown.stderr[-1000:]
    assert "/batch" not in quiet.stderr


def test_describe_binary_on_files(data):
    result = helpers.run_binary("pipelines.describe", *data[1], "--min_count=1")
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    assert out["vocab_size"] == 20 and out["oov_rate"]["train"] == 0.0
    assert set(out["tokens"]) == {"train", "valid", "test"}


def test_describe_reports_the_tail_share_of_each_short_list(tmp_path):
    files = {}
    for name, text in (("train", "a a a b b c\n"), ("valid", "c d </s> a\n"), ("test", "b\n")):
        files[name] = tmp_path / f"{name}.txt"
        files[name].write_text(text)
    corpus = ["--corpus=files", "--min_count=1", *(f"--{name}_files={path}" for name, path in files.items())]
    result = helpers.run_binary("pipelines.describe", *corpus, "--shortlists=3,4")
    assert result.returncode == 0, result.stderr[-3000:]
    # ids: </s> 0, <unk> 1, a 2, b 3, c 4; the unknown d and the literal </s> are <unk>, in every list, and
    # unknown as evaluation counts them; each line predicts </s>.
    out = json.loads(result.stdout)
    assert out["tail_share"] == {
        "3": {"train": 3 / 7, "valid": 1 / 5, "test": 1 / 2},
        "4": {"train": 1 / 7, "valid": 1 / 5, "test": 0.0},
    }
    assert out["oov_rate"]["valid"] == 2 / 5
    for flag, message in [  # the same sentences as benchmarks.shortlist_bound's
        ("--shortlists=3,5", "--shortlists has 5, which is not smaller than |V| = 5."),
        ("--shortlists=3,x", "--shortlists=3,x must be a comma-separated list of positive integers."),
    ]:
        helpers.assert_one_sentence(helpers.run_binary("pipelines.describe", *corpus, flag), message)


def test_describe_writes_the_splits_as_the_models_read_them_for_another_toolkit(tmp_path):
    """`--write_text`: the text another toolkit (KenLM's lmplz) needs to build and score a model on the same data
    and vocabulary: one unit a line, words outside the vocabulary (and a literal </s>) as --unk_token."""
    from pipelines import corpus as corpus_lib
    from pipelines import vocabulary

    paths = {}
    for name, text in (("train", "a a a b b e\n\n  b   a\n"), ("valid", "c d </s> a\n"), ("test", "b\tzz\n")):
        paths[name] = tmp_path / f"{name}.txt"
        paths[name].write_text(text)
    corpus = ["--corpus=files", "--min_count=2", *(f"--{name}_files={path}" for name, path in paths.items())]
    out_dir = tmp_path / "text"
    result = helpers.run_binary("pipelines.describe", *corpus, f"--write_text={out_dir}", "--unk_token=UNKWORD")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    written = {name: (out_dir / f"{name}.txt").read_text() for name in paths}
    assert written == {
        "train": "a a a b b UNKWORD\nb a\n",
        "valid": "UNKWORD UNKWORD UNKWORD a\n",
        "test": "b UNKWORD\n",
    }
    assert summary["text_dir"] == str(out_dir)
    for name, text in written.items():  # the tokens a model predicts: every word and each line's end
        assert len(text.split()) + text.count("\n") == summary["tokens"][name]

    again = helpers.run_binary("pipelines.describe", *corpus, f"--write_text={out_dir}")
    helpers.assert_one_sentence(again, f"--write_text={out_dir} already holds train.txt; give a directory without")
    assert {name: (out_dir / f"{name}.txt").read_text() for name in paths} == written  # untouched
    default = helpers.run_binary("pipelines.describe", *corpus, f"--write_text={tmp_path / 'plain'}")
    assert default.returncode == 0 and (tmp_path / "plain" / "test.txt").read_text() == "b <unk>\n"

    for flags, message in [
        (["--unk_token=UNKWORD"], "--unk_token needs --write_text=DIR."),
        ([f"--write_text={tmp_path / 'new'}", "--unk_token=a b"], "--unk_token='a b' must be one token"),
        ([f"--write_text={tmp_path / 'new'}", "--unk_token=b"], "--unk_token=b is a word of the vocabulary"),
        ([f"--write_text={paths['train']}"], "is a file, not a directory."),
        ([f"--write_text={paths['train']}/under"], "/under cannot be written (Not a directory); give a writable"),
    ]:
        helpers.assert_one_sentence(helpers.run_binary("pipelines.describe", *corpus, *flags), message)
    assert not (tmp_path / "new").exists()

    # A split that fails to read midway (bytes that are not UTF-8): the files written before it go, and the
    # directory made for them; nothing else is touched.
    (tmp_path / "bad.txt").write_bytes(b"a \xff b\n")
    split = corpus_lib.file_split(str(tmp_path / "bad.txt"), "test_files", "test")
    splits = {name: corpus_lib.file_split(str(paths[name]), f"{name}_files", name) for name in ("train", "valid")}
    broken = corpus_lib.Corpus("files", {**splits, "test": split})
    vocab = vocabulary.build(broken["train"], 2)
    with pytest.raises(corpus_lib.CorpusError):
        vocabulary.write_splits(broken, vocab, str(tmp_path / "deep" / "partial"), "UNKWORD")
    assert not (tmp_path / "deep").exists()
    # From Python, an unknown-word token that is a word of the vocabulary is a ValueError, before anything is made.
    with pytest.raises(ValueError, match="is a word of the vocabulary"):
        vocabulary.write_splits(broken, vocab, str(tmp_path / "deep" / "word"), vocab.words[2])
    assert not (tmp_path / "deep").exists()


def test_a_second_training_process_in_the_same_directory_is_refused_until_the_first_ends(data, tmp_path):
    model_dir = tmp_path / "m"
    args = [f"--model_dir={model_dir}", *TINY, *data[1]]
    first = helpers.start_binary("nplm_tf.train", *args, "--epochs=500", "--patience=500")
    try:
        deadline = time.time() + 120
        lock = model_dir / ".train.lock"  # held, its holder's pid written in it, until the process ends
        while not (lock.exists() and lock.read_text() == f"{first.pid}\n"):
            assert time.time() < deadline and first.poll() is None, "the first process took no lock"
            time.sleep(0.02)
        second = helpers.run_binary("nplm_tf.train", *args, "--epochs=500", "--patience=500")
        assert first.poll() is None  # still training: the refusal was the lock's
        helpers.assert_one_sentence(second, f"{model_dir} is being trained by another process (pid {first.pid})")
    finally:
        first.kill()  # as kill -9 would: the lock goes with the process
        first.wait()
    resumed = helpers.run_binary("nplm_tf.train", *args, "--epochs=1")
    assert resumed.returncode == 0, resumed.stderr[-3000:]


@pytest.mark.parametrize(
    "model", [[], ["--shortlist=8"], ["--shortlist=8", "--tail=network"]], ids=["full", "class_tail", "network_tail"]
)
def test_mirrored_strategy_with_two_cpu_devices_matches_one_device(model, data, tmp_path):
    results = {}
    for strategy, devices in (("default", 1), ("mirrored", 2)):
        result = helpers.run_binary(
            "nplm_tf.train",
            f"--model_dir={tmp_path / strategy}",
            "--epochs=2",
            *TINY,
            *model,
            *data[1],
            f"--strategy={strategy}",
            f"--num_cpu_devices={devices}",
            *(["--noexport"] if strategy == "default" else []),  # the mirrored run's export is the one to write
        )
        assert result.returncode == 0, result.stderr[-3000:]
        assert f"on {devices} replica(s)" in result.stdout
        results[strategy] = json.load(open(tmp_path / strategy / "metrics.json"))
    for key in ("valid_perplexity", "test_perplexity"):
        assert results["mirrored"][key] == pytest.approx(results["default"][key], rel=1e-4)
    losses = [[e["train_loss"] for e in results[s]["epochs"]] for s in ("default", "mirrored")]
    assert losses[1] == pytest.approx(losses[0], rel=1e-4)


def _bad_inputs(root):
    empty = helpers.write_lines(str(root / "empty.txt"), [""])
    short = helpers.write_lines(str(root / "short.txt"), ["a b", "c"])
    bad = root / "bad.txt"
    bad.write_bytes(b"the cat sat down .\nthe \xc3\x28 dog\n")
    return {
        "empty": ([f"--train_files={empty}"], "empty.txt is empty"),
        "short": ([f"--train_files={short}"], "short.txt has no line of at least 3 tokens"),
        "utf8": ([f"--train_files={bad}"], "bad.txt line 2 is not valid UTF-8"),
        "missing": ([f"--train_files={root / 'nope.txt'}"], "no file matches"),
        "order": (["--order=1"], "order=1 must be at least 2"),
        "features": (["--feature_dim=0"], "feature_dim=0 must be positive"),
        "hidden": (["--hidden_dim=-2"], "hidden_dim=-2 must be positive"),
        "min_count": (["--min_count=100000"], "min_count=100000 keeps no word of the train split"),
        # Before, the files were ignored and Brown was trained on.
        "other_corpus": (["--corpus=brown"], "--train_files, --valid_files, --test_files are for --corpus=files, but"),
        "gcide_flag": ([f"--gcide_path={empty}"], "--gcide_path is for --corpus=gcide, but the corpus is files; add"),
        # Once an IsADirectoryError traceback (train, reproduce and tuning.search read it alike).
        "config_dir": ([f"--config_json={root}"], f"config file {root} is a directory; give the JSON file in it."),
    }


@pytest.mark.parametrize(
    "case",
    [
        "empty",
        "short",
        "utf8",
        "missing",
        "order",
        "features",
        "hidden",
        "min_count",
        "other_corpus",
        "gcide_flag",
        "config_dir",
    ],
)
def test_bad_input_gives_one_sentence_and_nonzero_exit(case, data, tmp_path):
    """Refused before TensorFlow loads (once after it, some seconds later): the run never needs it."""
    flags, message = _bad_inputs(tmp_path)[case]
    result = helpers.run_binary(
        "nplm_tf.train",
        f"--model_dir={tmp_path / 'm'}",
        "--epochs=1",
        *TINY,
        *data[1],
        *flags,
        env=helpers.without_tensorflow(tmp_path),
    )
    assert "Traceback" not in result.stderr
    helpers.assert_one_sentence(result, message)
    assert not (tmp_path / "m").exists()  # not even an empty directory


def test_a_diverging_run_stops_with_one_sentence_and_saves_no_nan_weights(data, tmp_path):
    """Once it trained on to the end, exported NaN weights and printed a NaN perplexity with exit code 0."""
    model_dir = tmp_path / "m"
    flags = ["--learning_rate=1e30", "--optimizer=sgd"]
    result = helpers.run_binary("nplm_tf.train", f"--model_dir={model_dir}", "--epochs=2", *TINY, *data[1], *flags)
    helpers.assert_one_sentence(result, "training diverged in epoch 1 (")
    assert "lower --learning_rate and train in a new --model_dir (no epoch was saved)." in result.stderr
    assert not any((model_dir / name).exists() for name in ("history.json", "best.weights.h5", "metrics.json"))


@pytest.mark.parametrize("module", ["nplm_tf.ngram", "pipelines.describe"])
def test_a_min_count_that_keeps_no_word_is_one_sentence(module, data, tmp_path):
    out = tmp_path / "out"
    flags = [f"--output={out}"] if module == "nplm_tf.ngram" else []
    result = helpers.run_binary(module, *flags, *data[1], "--min_count=100000")
    helpers.assert_one_sentence(result, "min_count=100000 keeps no word of the train split")
    assert not out.exists()


@pytest.mark.parametrize("module", ["nplm_tf.ngram", "pipelines.describe"])
def test_binaries_without_a_network_do_not_load_tensorflow(module, data, tmp_path):
    # They are numpy and Python only; loading TensorFlow cost them 3 s and about 0.7 GB of memory.
    flags = [f"--output={tmp_path / 'out'}", "--order=2"] if module == "nplm_tf.ngram" else []
    code = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: print('tensorflow loaded:', 'tensorflow' in sys.modules, file=sys.stderr))\n"
        f"sys.argv = {[module, *flags, *data[1], '--min_count=1']!r}\n"
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"
    )
    env = {**os.environ, "NLTK_DATA": helpers.SHARED_NLTK}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=helpers.ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[-1])["vocab_size"] > 2
    assert result.stderr.splitlines()[-1] == "tensorflow loaded: False", result.stderr[-2000:]


def test_missing_brown_says_how_to_get_it(tmp_path):
    result = helpers.run_binary("pipelines.describe", env={"NLTK_DATA": str(tmp_path), "HOME": str(tmp_path)})
    assert result.returncode != 0
    assert "`pip install nltk && python -m nltk.downloader brown`" in helpers.error_lines(result.stderr)[0]


def test_model_dir_of_another_config_is_refused_and_left_intact(trained, data):
    model_dir, _ = trained
    before = open(os.path.join(model_dir, "metrics.json")).read()
    result = helpers.run_binary(
        "nplm_tf.train", f"--model_dir={model_dir}", "--epochs=2", *TINY, *data[1], "--hidden_dim=17"
    )
    assert result.returncode != 0
    assert "another configuration (hidden_dim: 16 -> 17)" in helpers.error_lines(result.stderr)[0]
    assert open(os.path.join(model_dir, "metrics.json")).read() == before


def _start_interruptible(module, *args, env=None, **popen):
    """`python -m module args` in the background, stdout and stderr piped, able to take a Ctrl-C (SIGINT)."""
    env = dict(os.environ, NLTK_DATA=helpers.SHARED_NLTK, **(env or {}))
    # A child inherits an ignored SIGINT, and Python then installs no KeyboardInterrupt handler: the suite run
    # as a background job of a non-interactive shell (POSIX ignores SIGINT and SIGQUIT there) sent its Ctrl-C
    # into the void and the child trained on. A handler set here is reset to the default at exec, as in a
    # terminal.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=helpers.ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            **popen,
        )
    finally:
        signal.signal(signal.SIGINT, previous)


def _start_train(model_dir, data, epochs):
    args = [f"--model_dir={model_dir}", f"--epochs={epochs}", "--patience=99", *TINY, *data[1]]
    return _start_interruptible("nplm_tf.train", *args, text=True)


def _wait_for_epochs(model_dir, proc, count, timeout=240):
    deadline = time.time() + timeout
    path = os.path.join(model_dir, "history.json")
    while time.time() < deadline and proc.poll() is None:
        if os.path.isfile(path) and len(json.load(open(path))) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {count} epochs recorded before the deadline")


def test_an_interrupted_tool_does_not_talk_of_resuming(trained):
    # Only the binaries that train resume; query, interrupted while it waits for input, just says so.
    import select

    args = [f"--model_dir={trained[0]}", "--batch_lines=1"]
    proc = _start_interruptible("nplm_tf.query", *args, env={"PYTHONUNBUFFERED": "1"}, stdin=subprocess.PIPE)
    try:
        proc.stdin.write(b"the cat\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "query printed nothing for its first line"
        assert b"Total:" in proc.stdout.readline()  # the line is scored: query now waits for the next one
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr[-3000:]
    assert helpers.error_lines(stderr.decode()) == ["error: interrupted."]


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGKILL, -9)])
def test_interrupted_training_resumes(sig, code, data, tmp_path):
    model_dir = str(tmp_path / "m")
    proc = _start_train(model_dir, data, epochs=12)
    try:
        _wait_for_epochs(model_dir, proc, 2)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, stderr[-3000:]
    if sig == signal.SIGINT:
        assert "run the same command again to resume" in helpers.error_lines(stderr)[0]
    recorded = json.load(open(os.path.join(model_dir, "history.json")))
    assert not os.path.exists(os.path.join(model_dir, "metrics.json"))
    result = helpers.run_binary(
        "nplm_tf.train", f"--model_dir={model_dir}", "--epochs=12", "--patience=99", "--noexport", *TINY, *data[1]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    first_new = int(result.stdout.split("\nepoch ")[1].split("/")[0])
    assert 2 <= first_new <= len(recorded) + 1  # resumed, not restarted
    assert f"resuming after epoch {first_new - 1} of 12 from " in result.stdout
    history = json.load(open(os.path.join(model_dir, "history.json")))
    assert len(history) == 12 and history["0"] == recorded["0"]
    assert not os.path.exists(os.path.join(model_dir, "export"))  # --noexport: nplm_tf.export writes it later


@pytest.mark.parametrize(
    "module,flags,message",
    [
        ("nplm_tf.ngram", ["--output=OUT", "--order=0"], "order=0 must be at least 1."),
        (
            "nplm_tf.ngram",
            ["--output=OUT", "--smoothing=interpolated"],
            "the interpolated model is a trigram; use --order=3 (got 5).",
        ),
        ("pipelines.describe", ["--min_count=0"], "min_count=0 must be at least 1."),
        ("pipelines.describe", ["--max_vocab=2"], "max_vocab=2 must be 0 (no limit) or at least 3"),
        ("nplm_tf.ngram", ["--output=OUT", "--max_vocab=-5"], "max_vocab=-5 must be 0 (no limit) or at least 3"),
        (
            "pipelines.describe",
            ["--shortlists=0"],
            "--shortlists=0 must be a comma-separated list of positive integers.",
        ),
        ("benchmarks.brown", ["--model_dir=OUT", "--shortlist=-1"], "shortlist=-1 must be >= 0"),
        ("benchmarks.brown", ["--model_dir=OUT", "--shortlist=20000"], "shortlist=20000 must be smaller than |V|"),
        # train's --ngram_dir is read as train reads it (it was ignored: hours of training on another tail)
        ("benchmarks.brown", ["--model_dir=OUT", "--shortlist=5", "--ngram_dir=/no/such"], "vocab.tsv does not exist"),
        ("benchmarks.pipeline", ["--repeat=0"], "repeat=0 must be at least 1."),
        (
            "nplm_tf.train",
            ["--model_dir=OUT", "--num_cpu_devices=2"],  # ignored: one replica trained
            "num_cpu_devices=2 splits the CPU into MirroredStrategy's replicas; use it with --strategy=mirrored",
        ),
        # Keras's fit cannot start on unequal replica batches (once an AddN shape error after the run was set up)
        (
            "nplm_tf.train",
            ["--model_dir=OUT", "--strategy=mirrored", "--num_cpu_devices=3"],
            "batch_size=256 does not split evenly over the 3 replicas of a mirrored strategy; give a multiple of 3, "
            "such as 255 or 258.",
        ),
        # Flags absl itself cannot parse: one sentence too, not absl's "FATAL Flags parsing error" and a hint.
        (
            "nplm_tf.train",
            ["--model_dir=OUT", "--tail=foo"],
            "error: --tail=foo is not one of class, backoff, sigmoid, network.",
        ),
        (
            "nplm_tf.evaluate",
            ["--model_dir=OUT", "--precision=float64"],
            "error: --precision=float64 is not one of float32, mixed_bfloat16.",
        ),
        ("nplm_tf.train", ["--model_dir=OUT", "--epoch=3"], "error: unknown flag --epoch; did you mean --epochs?"),
        ("nplm_tf.train", ["--model_dir=OUT", "--nodirect=3"], "error: --nodirect=3 does not take an argument."),
        ("benchmarks.throughput", ["--steps=abc"], "error: --steps=abc is not an integer."),
        ("nplm_tf.export", ["--export_dir=OUT"], "error: give one of --model_dir (a trained model) and --ensemble"),
        # each error names the flag given, not one left at its default
        ("nplm_tf.neighbors", ["--model_dir=OUT", "--words=a", "--k=0"], "error: --k=0 must be at least 1."),
        ("nplm_tf.neighbors", ["--model_dir=OUT", "--plot_words=1"], "error: --plot_words=1 must be at least 2."),
        ("nplm_tf.query", ["--model_dir=OUT", "--batch_lines=0"], "error: --batch_lines=0 must be at least 1."),
        ("nplm_tf.query", [], "error: give --model_dir (a network's or an n-gram directory) or --ngram_dir"),
    ],
)
def test_more_binaries_check_their_flags_first_and_write_nothing(module, flags, message, tmp_path):
    out = tmp_path / "out"
    env = helpers.without_tensorflow(tmp_path)  # every one refused before TensorFlow loads
    result = helpers.run_binary(module, *(flag.replace("OUT", str(out)) for flag in flags), env=env)
    helpers.assert_one_sentence(result, message)
    assert not out.exists()


def test_a_training_run_refused_by_its_flags_prints_its_error_alone(tmp_path):
    """The precision --precision=auto chose is said once every flag is checked, not before a refusal."""
    out = tmp_path / "out"
    result = helpers.run_binary(
        "nplm_tf.train", f"--model_dir={out}", "--epochs=0", env=helpers.without_tensorflow(tmp_path)
    )
    helpers.assert_one_sentence(result, "error: epochs=0 must be at least 1.")
    assert result.stdout == "" and not out.exists()


@pytest.mark.parametrize(
    "module,flag",
    [
        ("nplm_tf.train", "model_dir"),
        ("nplm_tf.ngram", "output"),
        ("nplm_tf.export", "export_dir"),
        ("nplm_tf.reproduce", "output"),
        ("tuning.search", "output_dir"),
        ("benchmarks.large_vocab", "output"),
        ("nplm_tf.evaluate", "per_token"),
        ("nplm_tf.neighbors", "plot"),
    ],
)
def test_an_output_path_that_cannot_be_written_is_refused_before_any_work(module, flag, trained, data, tmp_path):
    """A directory flag naming a file, a file flag naming a directory or a missing folder: one sentence before
    anything runs (once a traceback from os.makedirs, or an error after the whole evaluation), nothing touched."""
    a_file = tmp_path / "a_file"
    a_file.write_text("keep me\n")
    model = [] if flag in ("model_dir", "output", "output_dir") else [f"--model_dir={trained[0]}"]
    corpus = data[1] if module in ("nplm_tf.train", "nplm_tf.ngram", "tuning.search", "benchmarks.large_vocab") else []
    if flag in ("per_token", "plot"):
        cases = [
            (tmp_path, f"--{flag}={tmp_path} is a directory; give a file name."),
            (tmp_path / "missing" / "x", f"its directory {tmp_path / 'missing'} does not exist; create it first."),
        ]
    else:
        cases = [(a_file, f"--{flag}={a_file} is a file, not a directory.")]
    for path, message in cases:
        result = helpers.run_binary(module, *model, f"--{flag}={path}", *corpus)
        helpers.assert_one_sentence(result, message)
    assert a_file.read_text() == "keep me\n" and sorted(os.listdir(tmp_path)) == ["a_file"]


def test_mirrored_replicas_found_by_tensorflow_are_checked_before_the_run_is_set_up(data, tmp_path):
    """GPUs are counted only once TensorFlow loads: train with 3 of them (the strategy stands in for them) and
    the default batch 256 refused before anything is written (once after the run was set up, the directory
    left as a run that finished no epoch)."""
    model_dir = tmp_path / "model"
    script = (
        "import sys\n"
        "from nplm_tf import train\n"
        "class ThreeGPUs:\n"
        "    num_replicas_in_sync = 3\n"
        "train._strategy = lambda config: ThreeGPUs()\n"
        "train.run()\n"
    )
    flags = [f"--model_dir={model_dir}", "--strategy=mirrored", *TINY, "--batch_size=256", *data[1]]
    env = dict(os.environ, NLTK_DATA=helpers.SHARED_NLTK)
    result = subprocess.run(
        [sys.executable, "-c", script, *flags], cwd=helpers.ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    helpers.assert_one_sentence(result, "batch_size=256 does not split evenly over the 3 replicas of a mirrored")
    assert not model_dir.exists()


def test_running_out_of_memory_is_one_sentence(data, tmp_path):
    """Once TensorFlow's ResourceExhaustedError traceback (or Python's MemoryError): h = 2·10⁹ asks for an H
    of 2·10⁹ rows, over a hundred gigabytes."""
    from pipelines import app

    result = helpers.run_binary(
        "nplm_tf.train", f"--model_dir={tmp_path / 'm'}", *TINY, *data[1], "--hidden_dim=2000000000"
    )
    helpers.assert_one_sentence(result, "out of memory: a tensor of shape [")
    assert "use smaller settings (batch, layer sizes, vocabulary)" in result.stderr and result.returncode == 1
    assert app.exhausted_resource_sentence(MemoryError()).startswith("out of memory: Python could not allocate")
    full = app.exhausted_resource_sentence(OSError(errno.ENOSPC, "No space left on device"))
    assert full == "out of disk space (No space left on device); free some space and run the same command again."
    assert app.exhausted_resource_sentence(ValueError("OOM when allocating tensor with shape[3,4]")) is None


def test_damaged_weights_are_one_sentence_and_the_run_is_left_as_it_was(trained, tmp_path):
    """best.weights.h5 truncated since training: once an h5py OSError traceback from every tool."""
    model_dir = tmp_path / "m"
    shutil.copytree(trained[0], model_dir)
    weights = model_dir / "best.weights.h5"
    weights.write_bytes(weights.read_bytes()[:1000])
    result = helpers.run_binary("nplm_tf.evaluate", f"--model_dir={model_dir}")
    helpers.assert_one_sentence(result, f"{weights} cannot be read (")
    assert "restore it, or train again in a new directory" in result.stderr
    assert len(weights.read_bytes()) == 1000 and sorted(os.listdir(model_dir)) == sorted(os.listdir(trained[0]))


def test_a_path_flag_and_a_file_glob_starting_with_tilde_are_under_home(data, tmp_path):
    """A shell leaves `~` alone in `--output=~/kn`; the run lands in $HOME, not in a directory named "~" here."""
    home = tmp_path / "home"
    home.mkdir()
    for name, flag in zip(("train", "valid", "test"), data[1][1:4]):  # --train_files=PATH, ...
        shutil.copy(flag.split("=", 1)[1], home / f"{name}.txt")
    stray = os.path.join(helpers.ROOT, "~")
    assert not os.path.exists(stray)
    files = ["--corpus=files", "--train_files=~/train.txt", "--valid_files=~/valid.txt", "--test_files=~/test.txt"]
    try:
        result = helpers.run_binary("nplm_tf.ngram", "--output=~/kn", "--order=2", *files, env={"HOME": str(home)})
    finally:
        strayed = os.path.exists(stray)
        shutil.rmtree(stray, ignore_errors=True)
    assert result.returncode == 0 and not strayed, result.stderr[-2000:]
    assert os.path.isfile(home / "kn" / "metrics.json")
    assert "warning" not in result.stderr


def test_valid_or_test_files_that_train_also_reads_are_warned_about(data, tmp_path):
    train = data[1][1].split("=", 1)[1]
    shared = ["--corpus=files", data[1][1], f"--valid_files={train}", data[1][3]]
    result = helpers.run_binary("pipelines.describe", *shared)
    assert result.returncode == 0, result.stderr[-2000:]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: --valid_files and --train_files share {train}: valid perplexity is then measured on text the "
        "model trained on."
    ]


@pytest.mark.parametrize(
    "module, path_flags",
    [("nplm_tf.train", ["model_dir", "config_json", "ngram_dir"]), ("nplm_tf.evaluate", ["model_dir", "per_token"])],
)
def test_help_lists_the_path_flags_with_the_binarys_own(module, path_flags):
    """`app.define_path` defines them on the binary's behalf: absl's --help shows only the binary's key flags."""
    result = helpers.run_binary(module, "--help")  # exits 1, as absl's --help does
    own = result.stdout.split(f"{module.replace('.', '/')}.py:", 1)[1].split("\n\n", 1)[0]
    assert all(f"  --{name}: " in own for name in path_flags), own


def test_per_token_to_a_pipe_is_written_into_it(trained, tmp_path):
    """`--per_token=/dev/stdout` or a FIFO: once the finished table was renamed over it (a regular file in its
    place) or refused when its directory (/dev) was not writable."""
    import stat

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    out = tmp_path / "read.tsv"
    reader = subprocess.Popen(["sh", "-c", f"cat '{fifo}' > '{out}'"])
    try:
        result = helpers.run_binary("nplm_tf.evaluate", f"--model_dir={trained[0]}", f"--per_token={fifo}")
        reader.wait(timeout=60)
    finally:
        reader.kill()
    assert result.returncode == 0, result.stderr[-2000:]
    rows = out.read_text().splitlines()
    assert rows and all(len(row.split("\t")) == 3 for row in rows) and rows[-1].startswith("</s>\t")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and sorted(os.listdir(tmp_path)) == ["pipe", "read.tsv"]


def test_a_binarys_exit_runs_the_finalizers_of_its_garbage_and_freezes_the_rest(tmp_path):
    """`app.run` collects at exit, then freezes what is left (Python's shutdown would otherwise walk
    TensorFlow's objects in collection after collection): garbage in a reference cycle is still finalized (a
    finalizer that writes a file, as a writer's flush would), and the collector is left nothing to walk."""
    import gc

    from pipelines import app

    out, frozen_count = tmp_path / "finalized.txt", tmp_path / "frozen.txt"
    script = tmp_path / "leaves_a_cycle.py"
    script.write_text(
        "import atexit, gc\n"
        "from pipelines import app\n"
        f"atexit.register(lambda: open({str(frozen_count)!r}, 'w').write(str(gc.get_freeze_count())))  # runs last\n"
        "class Cyclic:\n"
        "    def __del__(self):\n"
        f"        open({str(out)!r}, 'w').write('finalized')\n"
        "def main(argv):\n"
        "    garbage = Cyclic()\n"
        "    garbage.self = garbage  # a cycle: only the collector frees it\n"
        "app.run(main, tensorflow=False)\n"
    )
    result = subprocess.run([sys.executable, str(script)], cwd=helpers.ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert out.read_text() == "finalized"
    assert int(frozen_count.read_text()) > 0

    finalized = []

    class Cyclic:
        def __del__(self):
            finalized.append(True)

    garbage = Cyclic()
    garbage.self = garbage
    del garbage
    frozen = gc.get_freeze_count()
    try:
        app.collect_then_freeze()
        assert finalized == [True]
        assert gc.get_freeze_count() > frozen
    finally:
        gc.unfreeze()
