"""The measurement scripts: a short real run, and one sentence for a bad flag value."""

import json

import pytest

from benchmarks import host
from tests import helpers


def test_the_steal_share_is_the_stolen_part_of_all_cpu_time(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 50 0 25 400 5 0 2 17 0 0\n")
    before = host.cpu_times(str(stat))
    stat.write_text("cpu  200 0 70 900 10 0 5 95 7 0\ncpu0 100 0 35 450 5 0 2 47 3 0\n")
    after = host.cpu_times(str(stat))
    assert host.steal_share(before, after) == pytest.approx(60 / 280)  # guest time is inside user's already
    assert host.steal_share(before, before) is None  # no time passed
    assert host.cpu_times(str(tmp_path / "absent")) is None and host.steal_share(None, after) is None
    own = host.cpu_times()  # this Linux host's
    assert own is not None and 0.0 <= host.steal_share(own, tuple(t + 1 for t in own)) <= 1.0


def test_optimizer_benchmark_times_all_three_optimizers():
    result = helpers.run_binary("benchmarks.optimizer", "--steps=2", "--repeats=1")
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["floats"] == 100 * 14118 + 14119 * 30 + 120 * 100 + 100 + 14118
    for name in ("keras_adam", "fused_adam", "sgd"):
        assert out[name + "_ms"] > 0 and len(out[name + "_ms_runs"]) == 1


@pytest.mark.parametrize(
    "module,flag,message",
    [
        ("benchmarks.throughput", "--steps=32", "steps=32 must be more than 32"),
        ("benchmarks.throughput", "--repeats=0", "repeats=0 must be at least 1"),
        ("benchmarks.throughput", "--shortlist=20000", "shortlist=20000 must be smaller than |V| = 14,118"),
        ("benchmarks.optimizer", "--steps=0", "steps=0 and repeats=3 must be at least 1"),
        ("benchmarks.scaling", "--repeats=0", "repeats=0, workers=2 and steps=160 must be at least 1"),
        ("benchmarks.scaling", "--balance_workers", "balance_workers=True needs sync_every > 1"),
        ("benchmarks.compare_coverage", "--runs=0", "--runs must be at least 1 and --run_sd at least 0"),
        ("benchmarks.compare_coverage", "--run_sd=x", "--runs must be whole numbers and --run_sd numbers"),
        ("benchmarks.nplm_toolkit", "--nplm_bin=/nonexistent", "has no executable prepareNeuralLM"),
        ("benchmarks.nplm_toolkit", "--steps=32", "--steps=32: 32 is not integer >= 64."),
        ("benchmarks.ctc_decoding", "--alphas=a,0.5", "--alphas must be a comma-separated list of numbers"),
        ("benchmarks.ctc_decoding", "--betas=-1", "of at least 0, not '-1'"),
        ("benchmarks.ctc_decoding", "--decoder=flashlight --betas=-1,inf", "list of finite numbers, not '-1,inf'"),
        ("benchmarks.ctc_decoding", "--decoder=flashlight --rounds=0", "--rounds=0 must be at least 1"),
        ("benchmarks.ctc_decoding", "--test_utterances=0", "--test_utterances must be at least 1"),
    ],
)
def test_bad_flag_values_are_one_sentence(module, flag, message, tmp_path):
    result = helpers.run_binary(module, *flag.split(), env=helpers.without_tensorflow(tmp_path))  # before it loads
    assert "Traceback" not in result.stderr
    helpers.assert_one_sentence(result, message)


def test_compare_intervals_cover_a_runs_luck_only_from_several_runs_a_model(tmp_path):
    result = helpers.run_binary(
        "benchmarks.compare_coverage",
        "--runs=1,5",
        "--run_sd=0,0.05",
        "--trials=60",
        "--samples=200",
        env=helpers.without_tensorflow(tmp_path),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    cells = {(c["runs"], c["run_sd"]): c["coverage"] for c in map(json.loads, result.stdout.splitlines())}
    assert cells[(1, 0.0)] > 0.85 and cells[(5, 0.0)] > 0.85  # runs alike: the units' resampling covers it
    assert cells[(1, 0.05)] < 0.5 < 0.8 < cells[(5, 0.05)]  # a run's luck: only the runs' resampling covers it


@pytest.mark.parametrize(
    "flags,message",
    [
        ([], "holds no SavedModel (no saved_model.pb); pass an export version directory"),
        (["--requests=0"], "requests=0 must be at least 1"),
        (["--batches=-1"], "batches=-1 must be at least 1"),
        (["--generations=-1"], "generations=-1 must be at least 0"),
        (
            ["--corpus=files", "--train_files={text}", "--valid_files={text}", "--test_files={empty}"],
            "empty.txt is empty",
        ),
        (["--against=x", "--rounds=0"], "rounds=0 must be at least 1 and at most requests=2000 and batches=40"),
        (["--against=x", "--generations=3"], "generations=3 must be 0 or at least rounds=5"),
    ],
)
def test_serving_bad_flags_are_one_sentence(flags, message, tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    if "no SavedModel" not in message:  # what the check looks for, so that it goes on to the next flag
        (export / "saved_model.pb").write_bytes(b"")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "text.txt").write_text("the cat sat on the mat\n")
    flags = [flag.format(empty=tmp_path / "empty.txt", text=tmp_path / "text.txt") for flag in flags]
    env = helpers.without_tensorflow(tmp_path)  # every one refused before TensorFlow loads
    result = helpers.run_binary("benchmarks.serving", f"--export={export}", *flags, env=env)
    helpers.assert_one_sentence(result, message)


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--rounds=0"], "rounds=0 must be at least 1 and at most requests=500 and batches=40"),
        (["--batches=3"], "rounds=5 must be at least 1 and at most requests=500 and batches=3"),
        (["--shortlists=4000,0"], "--shortlists=4000,0 must be a comma-separated list of positive integers."),
        (["--num_sampled=0"], "num_sampled=0 must be positive."),  # the sampled variants ran last, hours in
        (["--min_count=0"], "min_count=0 must be"),
        (["--learning_rate=0"], "learning_rate=0.0 must be positive"),
        (["--shortlists=4000,20000"], "shortlist=20000 must be smaller than |V| = 14,118"),  # Brown's, before training
        (["--serve_only"], "--serve_only needs a finished run of"),
        # checked before hours of training, not when the table is ready
        (["--readme=/no/such/README.md"], "--readme=/no/such/README.md is not a file; give benchmarks/README.md"),
        (
            ["--readme=setup.py"],
            "setup.py has no '<!-- large_vocab table: begin -->' ... '<!-- large_vocab table: end -->'",
        ),
        (
            ["--variants=softmax,nope", "--shortlists=6", "--num_sampled=5"],
            "unknown variants ['nope']; choose from "
            "['softmax', 'shortlist_6_class', 'shortlist_6_backoff', 'shortlist_6_network', 'sampled_softmax_5', "
            "'nce_5']",
        ),
    ],
)
def test_large_vocab_bad_flags_are_one_sentence_and_write_nothing(flags, message, tmp_path):
    env = helpers.without_tensorflow(tmp_path)  # every one refused before TensorFlow loads
    result = helpers.run_binary("benchmarks.large_vocab", f"--output={tmp_path / 'out'}", *flags, env=env)
    helpers.assert_one_sentence(result, message)
    assert not (tmp_path / "out").exists()


def test_large_vocab_benchmark_alternates_variants_and_writes_its_table(tmp_path):
    paths = helpers.tiny_corpus_files(tmp_path, train=150, valid=20, test=20)
    readme = tmp_path / "README.md"
    readme.write_text("# Benchmarks\n<!-- large_vocab table: begin -->\nold\n<!-- large_vocab table: end -->\ntail\n")
    names = ["softmax", "shortlist_6_class", "nce_5"]  # of the six (the bad-flag test lists them all)
    flags = [
        f"--output={tmp_path / 'out'}",
        "--epochs=2",
        "--shortlists=6",
        "--num_sampled=5",
        f"--variants={','.join(names)}",
        "--requests=6",
        "--batches=4",
        "--rounds=2",
        "--min_count=1",
        "--learning_rate=0.02",
        f"--readme={readme}",
        "--corpus=files",
        f"--train_files={paths['train']}",
        f"--valid_files={paths['valid']}",
        f"--test_files={paths['test']}",
    ]
    result = helpers.run_binary("benchmarks.large_vocab", *flags, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    order = [json.loads(line)["variant"] for line in result.stdout.splitlines() if '"epoch"' in line]
    assert order == names + names  # epoch 1 of every variant, then epoch 2
    written = json.load(open(tmp_path / "out" / "large_vocab.json"))
    saved = written["results"]
    assert written["call_floor"]["next_word_ms"]["requests"] == 6  # the one-op signature, timed beside them
    assert written["learning_rate"] == 0.02
    for name in names:
        assert [row["epoch"] for row in saved[name]["epochs"]] == [1, 2]
        assert json.load(open(tmp_path / "out" / name / "config.json"))["learning_rate"] == 0.02  # every variant's
        assert all(0.0 <= row["cpu_steal"] <= 1.0 for row in saved[name]["epochs"])  # the hypervisor's share
        assert saved[name]["serving"]["score_tokens_per_second"] > 0
        assert len(saved[name]["serving"]["score_rounds"]) == 2  # every export timed in each round
        assert saved[name]["serving"]["next_word_ms"]["requests"] == 6
    page = readme.read_text()
    assert "old" not in page and "| nce_5 | 2 |" in page and page.endswith("tail\n")
    assert "MLP9 shape, batch 256, ε_0 = 0.02." in page
    row = next(line for line in page.splitlines() if line.startswith("| nce_5 | 2 |")).split(" | ")
    assert "| CPU steal |" in page and row[6] == f"{saved['nce_5']['epochs'][1]['cpu_steal']:.0%}"
    assert "A signature of one op" in page
    assert "×;" in page  # score against the full softmax's, per round

    unset = [flag for flag in flags if not flag.startswith("--learning_rate")]  # the runs' ε_0 is read back
    again = helpers.run_binary("benchmarks.large_vocab", *unset, "--serve_only", timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert '"epoch"' not in again.stdout  # nothing trained
    assert "MLP9 shape, batch 256, ε_0 = 0.02." in readme.read_text()
    assert json.load(open(tmp_path / "out" / "large_vocab.json"))["learning_rate"] == 0.02
    resaved = json.load(open(tmp_path / "out" / "large_vocab.json"))["results"]
    assert all(resaved[name]["epochs"] == saved[name]["epochs"] for name in names)


def _zipf_corpus(output, *flags):
    result = helpers.run_binary("benchmarks.zipf_corpus", f"--output={output}", *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_zipf_corpus_draws_frequent_words_and_their_successors_the_same_each_time(tmp_path):
    small = ["--train_tokens=3000", "--eval_tokens=300", "--ranks=400", "--line_words=7", "--seed=5"]
    report = _zipf_corpus(tmp_path / "a", *small)
    lines = (tmp_path / "a" / "train.txt").read_text().splitlines()
    assert len(lines) == 429 and all(1 <= len(line.split()) <= 7 for line in lines)  # ⌈3000 / 7⌉ lines
    ranks = [int(word[1:], 16) for line in lines for word in line.split()]
    assert len(ranks) == report["train"]["tokens"] == 3000 and max(ranks) < 400
    assert report["train"]["distinct"] == len(set(ranks))
    assert max(set(ranks), key=ranks.count) == 0  # the law's most likely word is the most frequent
    successors = sum(b == (a * 7 + 3) % 400 for a, b in zip(ranks, ranks[1:], strict=False)) / (len(ranks) - 1)
    assert 0.25 < successors < 0.40  # --follow=0.3, and chance
    for name in ("valid", "test"):
        assert report[name]["tokens"] == len((tmp_path / "a" / f"{name}.txt").read_text().split()) == 300
    assert (tmp_path / "a" / "valid.txt").read_text() != (tmp_path / "a" / "test.txt").read_text()
    _zipf_corpus(tmp_path / "b", *small)
    _zipf_corpus(tmp_path / "c", *small[:-1], "--seed=6", "--follow=0")
    for name in ("train", "valid", "test"):
        text = (tmp_path / "a" / f"{name}.txt").read_text()
        assert (tmp_path / "b" / f"{name}.txt").read_text() == text != (tmp_path / "c" / f"{name}.txt").read_text()
    other = [int(word[1:], 16) for word in (tmp_path / "c" / "train.txt").read_text().split()]
    assert sum(b == (a * 7 + 3) % 400 for a, b in zip(other, other[1:], strict=False)) / (len(other) - 1) < 0.05

    before = (tmp_path / "a" / "train.txt").read_bytes()
    result = helpers.run_binary("benchmarks.zipf_corpus", f"--output={tmp_path / 'a'}", "--train_tokens=10")
    helpers.assert_one_sentence(result, "train.txt already exists; choose another --output or remove it")
    assert (tmp_path / "a" / "train.txt").read_bytes() == before
    result = helpers.run_binary("benchmarks.zipf_corpus", f"--output={tmp_path / 'd'}", "--follow=1")
    helpers.assert_one_sentence(result, "--follow=1.0 must be in [0, 1)")
    assert not (tmp_path / "d").exists()


def test_throughput_times_a_head_beside_the_full_softmax_in_turns(tmp_path):
    """--beside_softmax: each repeat of the class-factored head is followed by one of the full softmax of the same
    shape, and each repeat's ratio is reported."""
    paths = helpers.tiny_corpus_files(tmp_path, train=200)
    result = helpers.run_binary(
        "benchmarks.throughput",
        "--classes=-1",
        "--beside_softmax",
        "--steps=64",
        "--warmup_steps=2",
        "--repeats=2",
        "--min_count=1",
        "--precision=float32",
        *helpers.files_flags(paths),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["config"]["classes"] == -1 and len(out["softmax_tokens_per_second_runs"]) == 2
    for ours, theirs, ratio in zip(
        out["tokens_per_second_runs"], out["softmax_tokens_per_second_runs"], out["over_softmax_runs"], strict=True
    ):
        assert ours > 0 and theirs > 0 and ratio == pytest.approx(ours / theirs, rel=0.01)


PRINTED = """
Genesis 1

  1 In the beginning God created the heaven and the earth.
  2 And the earth was without form, and void; and darkness was upon the face of
the deep. And the LORD's Spirit moved 7 times.

Genesis 2

  1 Thus the heavens were finished.
"""


def test_the_kjv_corpus_reads_the_programs_chapters_and_verses(tmp_path):
    from pipelines import kjv

    chapters = kjv.chapters(PRINTED)
    assert len(chapters) == 2 and len(chapters[0]) == 2 and chapters[1] == ["Thus the heavens were finished."]
    assert chapters[0][1].endswith("face of the deep. And the LORD's Spirit moved 7 times.")  # wrapped lines joined
    assert kjv.tokens(chapters[0][1]).split()[-6:] == ["LORD's", "Spirit", "moved", "7", "times", "."]
    assert [kjv.split_of(i) for i in (0, 17, 18, 19, 20, 38, 39)] == [
        "train", "train", "valid", "test", "train", "valid", "test"
    ]  # fmt: skip
    fake = tmp_path / "bible"
    fake.write_text("#!/bin/sh\nprintf '\\nGenesis 1\\n\\n  1 In the beginning.\\n'\n")
    fake.chmod(0o755)
    result = helpers.run_binary("benchmarks.kjv_corpus", f"--bible={fake}", f"--output={tmp_path / 'out'}")
    helpers.assert_one_sentence(result, "printed 1 chapters, not the King James Bible's 1,189")
    assert not (tmp_path / "out").exists()
    missing = helpers.run_binary("benchmarks.kjv_corpus", f"--bible={tmp_path / 'none'}", f"--output={tmp_path / 'o'}")
    helpers.assert_one_sentence(missing, "could not print the text")
