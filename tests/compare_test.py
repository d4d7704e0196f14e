"""Per-token files and their paired bootstrap comparison (`nplm_tf.compare`)."""

import math

import numpy as np
import pytest

from pipelines import per_token
from pipelines.errors import UserError

WORDS = ["a", "b", "</s>", "c", "</s>", "a", "a", "a", "</s>"]


def test_units_end_at_each_end_of_line():
    sums, lengths = per_token.unit_sums(WORDS, -np.arange(1.0, 10.0))
    assert lengths.tolist() == [3, 2, 4]
    assert sums.tolist() == [-6.0, -9.0, -30.0]


def test_a_candidate_better_on_every_token_by_the_same_amount_has_that_ratio_in_every_resampling():
    baseline = -np.linspace(1.0, 5.0, len(WORDS))
    result = per_token.compare(WORDS, baseline, baseline + 0.1, samples=200, seed=3)
    assert result["ratio"] == pytest.approx(math.exp(-0.1))
    assert result["ratio_95"] == pytest.approx([math.exp(-0.1)] * 2)
    assert result["candidate_better_share"] == 1.0 and result["units_candidate_better"] == 3
    assert result["baseline_perplexity"] == pytest.approx(math.exp(-baseline.mean()))
    same = per_token.compare(WORDS, baseline, baseline, samples=50, seed=3)
    assert same["ratio"] == 1.0 and same["ratio_95"] == [1.0, 1.0] and same["candidate_better_share"] == 0.0


def test_a_difference_that_depends_on_the_units_chosen_gets_an_interval_around_one():
    rng = np.random.default_rng(0)
    words = (["w"] * 9 + ["</s>"]) * 40
    baseline = -rng.uniform(1.0, 6.0, len(words))
    # Each unit's tokens shifted alike, by ln P differences of standard deviation 0.5 and mean 0 over the
    # units (of equal length): the overall ratio is 1.
    shift = rng.normal(0.0, 0.5, 40)
    candidate = baseline + np.repeat(shift - shift.mean(), 10)
    result = per_token.compare(words, baseline, candidate, samples=2000, seed=1)
    assert result["ratio"] == pytest.approx(1.0)
    low, high = result["ratio_95"]
    assert 0.8 < low < 0.95 and 1.05 < high < 1.25  # about exp(±1.96 · 0.5 / √40)
    assert 0.3 < result["candidate_better_share"] < 0.7
    again = per_token.compare(words, baseline, candidate, samples=2000, seed=1)
    other = per_token.compare(words, baseline, candidate, samples=2000, seed=2)
    assert again == result and other["ratio_95"] != result["ratio_95"]


def test_runs_of_each_model_are_resampled_too_so_their_spread_widens_the_interval():
    rng = np.random.default_rng(0)
    words = (["w"] * 9 + ["</s>"]) * 40
    base = -rng.uniform(1.0, 6.0, len(words))
    # Three training runs a model, each run better or worse on every token alike: the candidate's mean is
    # 0.05 nats a token better, its runs' spread (and the baseline's) four times that.
    baseline = np.stack([base + shift for shift in (0.2, -0.2, 0.0)])
    candidate = np.stack([base + shift for shift in (0.25, -0.15, 0.05)])
    one = per_token.compare(words, baseline[2], candidate[2], samples=500, seed=1)
    assert (one["baseline_runs"], one["candidate_runs"]) == (1, 1)
    assert one["ratio_95"] == pytest.approx([math.exp(-0.05)] * 2)  # the units alone cannot tell the runs apart
    result = per_token.compare(words, baseline, candidate, samples=2000, seed=1)
    assert (result["baseline_runs"], result["candidate_runs"]) == (3, 3)
    assert result["ratio"] == pytest.approx(math.exp(-0.05))
    assert result["baseline_perplexity"] == pytest.approx(math.exp(-base.mean()))  # the runs' geometric mean
    assert result["candidate_perplexity_runs"] == pytest.approx(
        [math.exp(-base.mean() - s) for s in (0.25, -0.15, 0.05)]
    )
    low, high = result["ratio_95"]
    assert 0.6 < low < 0.9 and 1.05 < high < 1.4  # about exp(-0.05 ± 1.96 · 0.163)
    assert 0.5 < result["candidate_better_share"] < 0.9
    assert result["units_candidate_better"] == 40  # each unit's mean over the runs: 0.05 nats a token better
    # Runs that agree leave the units' interval as it was.
    same = per_token.compare(words, np.stack([base] * 3), np.stack([base + 0.05] * 2), samples=200, seed=1)
    assert same["ratio_95"] == pytest.approx([math.exp(-0.05)] * 2)


@pytest.mark.parametrize("runs", [2, 3, 5])
def test_the_resampled_runs_vary_by_their_unbiased_variance(runs):
    # Each run better or worse on every token alike, and the units alike: the resampled ln ratio is the
    # difference of the two models' drawn run means, whose variance should be s^2 / R a model, s^2 the runs'
    # unbiased variance. A plain draw of R runs gives (R - 1)/R of that (1/2 at R = 2).
    rng = np.random.default_rng(runs)
    words = (["w"] * 4 + ["</s>"]) * 30
    base = -rng.uniform(1.0, 6.0, len(words))
    base_shifts, cand_shifts = rng.normal(0.0, 0.1, runs), rng.normal(0.05, 0.2, runs)
    base_units, lengths = per_token.unit_sums(words, np.stack([base + s for s in base_shifts]))
    cand_units, _ = per_token.unit_sums(words, np.stack([base + s for s in cand_shifts]))
    ratios = per_token.resampled_ratios(base_units, cand_units, lengths, samples=20000, seed=1)
    expected = (np.var(base_shifts, ddof=1) + np.var(cand_shifts, ddof=1)) / runs
    assert np.var(np.log(ratios)) == pytest.approx(expected, rel=0.04)
    assert np.mean(np.log(ratios)) == pytest.approx(base_shifts.mean() - cand_shifts.mean(), abs=0.01)


def test_the_binary_takes_several_runs_a_model_as_comma_separated_files_or_globs(tmp_path):
    import json

    from tests import helpers

    shifts = {"base_1.tsv": 0.2, "base_2.tsv": -0.2, "cand_1.tsv": 0.25, "cand_2.tsv": -0.15}
    for name, shift in shifts.items():
        per_token.write(str(tmp_path / name), WORDS, -np.arange(1.0, 10.0) + shift)
    env = helpers.without_tensorflow(tmp_path)

    def compare(*args):
        return helpers.run_binary("nplm_tf.compare", *args, "--samples=50", env=env, timeout=120)

    ran = compare(f"--baseline={tmp_path}/base_*.tsv", f"--candidate={tmp_path}/cand_1.tsv, {tmp_path}/cand_2.tsv")
    assert ran.returncode == 0, ran.stderr[-2000:]
    result = json.loads(ran.stdout)
    assert (result["baseline_runs"], result["candidate_runs"]) == (2, 2)
    assert result["ratio"] == pytest.approx(math.exp(-0.05), rel=1e-5)
    (tmp_path / "cand_3.tsv").write_text((tmp_path / "cand_1.tsv").read_text().replace("c\t", "<unk>\t"))
    for args, message in [
        ((f"--baseline={tmp_path}/base_*.tsv", f"--candidate={tmp_path}/c_*.tsv"), "no file matches"),
        (
            (f"--baseline={tmp_path}/base_*.tsv", f"--candidate={tmp_path}/cand_*.tsv"),
            f"{tmp_path}/base_1.tsv and {tmp_path}/cand_3.tsv score different tokens (token 4: 'c' and '<unk>')",
        ),
    ]:
        ran = compare(*args)
        assert ran.returncode != 0 and ran.stdout == ""
        assert ran.stderr.strip().splitlines()[-1].startswith("error:") and message in ran.stderr, ran.stderr


def _write(path, rows):
    path.write_text("".join(f"{w}\t{p}\t{p}\n" for w, p in rows), encoding="utf-8")
    return str(path)


def test_a_written_file_reads_back(tmp_path):
    path = str(tmp_path / "t.tsv")
    per_token.write(path, WORDS, -np.arange(1.0, 10.0) / 3)
    words, values, kind = per_token.read(path, "baseline")
    assert (words, kind) == (WORDS, "per-token")
    assert np.allclose(values, -np.arange(1.0, 10.0) / 3, atol=1e-6)
    first = open(path, encoding="utf-8").readline().split("\t")
    assert float(first[2]) == pytest.approx(float(first[1]) / math.log(10), abs=1e-6)


@pytest.mark.parametrize(
    "rows,message",
    [
        ([("a", "-1.0"), ("</s>", "x")], "line 2 is not token<TAB>ln_prob<TAB>log10_prob"),
        ([("a", "0.5"), ("</s>", "-1")], "line 1 has ln P = 0.5, which is not a log-probability."),
        ([("a", "nan"), ("</s>", "-1")], "line 1 has ln P = nan, which is not a log-probability."),
        ([("a", "-1.0"), ("b", "-1")], "does not end with </s>: it is cut short"),
        ([], "is empty"),
    ],
)
def test_a_file_that_is_not_per_token_scores_is_one_sentence(rows, message, tmp_path):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        per_token.read(_write(tmp_path / "bad.tsv", rows), "baseline")


def test_two_files_must_score_the_same_tokens():
    per_token.check_same_tokens(("a.tsv", WORDS, "per-token"), ("b.tsv", list(WORDS), "per-token"))
    with pytest.raises(UserError, match=r"^a.tsv and b.tsv score different tokens \(token 4: 'c' and '<unk>'\)"):
        per_token.check_same_tokens(
            ("a.tsv", WORDS, "per-token"), ("b.tsv", WORDS[:3] + ["<unk>"] + WORDS[4:], "per-token")
        )
    with pytest.raises(UserError, match="a.tsv has 9 tokens and b.tsv 6; score the same text with both."):
        per_token.check_same_tokens(("a.tsv", WORDS, "per-token"), ("b.tsv", WORDS[:6], "per-token"))
    with pytest.raises(UserError, match="^a.tsv is a per-token file and b.txt `nplm_tf.query`'s output; compare two"):
        per_token.check_same_tokens(("a.tsv", WORDS, "per-token"), ("b.txt", WORDS, "query"))


QUERY = (
    "The=13 1 -0.834606\tjury=1459 2 -2.83576\t</s>=0 3 -5.075\tTotal: -8.745366 OOV: 0\n"
    "</s>=0 1 -2.66741\tTotal: -2.66741 OOV: 0\n"
    "a=b=1 1 -0.5\t</s>=1 2 -1.5\t</s>=0 3 -2\tTotal: -4 OOV: 2\n"
    "Perplexity including OOVs:\t147.5594888\n"
    "Perplexity excluding OOVs:\t200.3297482\n"
    "OOVs:\t2\n"
    "Tokens:\t9\n"
)


def test_query_output_reads_as_lines_of_word_id_tokens(tmp_path):
    path = tmp_path / "q.txt"
    path.write_text(QUERY, encoding="utf-8")
    words, values, kind = per_token.read(str(path), "baseline")
    # A literal "</s>" in the text is the unknown word (id 1), not an end of line.
    assert words == ["The=13", "jury=1459", "</s>", "</s>", "a=b=1", "</s>=1", "</s>"]
    assert kind == "query"
    assert np.allclose(values / math.log(10), [-0.834606, -2.83576, -5.075, -2.66741, -0.5, -1.5, -2])
    assert per_token.unit_sums(words, values)[1].tolist() == [3, 1, 3]
    path.write_text(QUERY.replace("jury=1459 2 -2.83576", "jury -2.83576"), encoding="utf-8")
    with pytest.raises(UserError, match=r"line 1 has 'jury -2.83576', which is not `word=id n log10P`"):
        per_token.read(str(path), "baseline")
    path.write_text(QUERY.replace("Total: -4 OOV: 2", "and more"), encoding="utf-8")
    with pytest.raises(UserError, match="line 3 is not a line of `nplm_tf.query`'s output"):
        per_token.read(str(path), "baseline")


def test_the_binary_runs_without_tensorflow(tmp_path):
    """`compare` is numpy only: it runs where TensorFlow cannot be imported."""
    import json
    import subprocess
    import sys

    from tests import helpers

    paths = [str(tmp_path / name) for name in ("a.tsv", "b.tsv")]
    for path, shift in zip(paths, (0.0, 0.2)):
        per_token.write(path, WORDS, -np.arange(1.0, 10.0) + shift)
    code = (
        "import runpy, sys\n"
        "sys.modules['tensorflow'] = None  # an import of it now raises ImportError\n"
        f"sys.argv = ['nplm_tf.compare', '--baseline={paths[0]}', '--candidate={paths[1]}', '--samples=50']\n"
        "runpy.run_module('nplm_tf.compare', run_name='__main__', alter_sys=True)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=helpers.ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["ratio"] == pytest.approx(math.exp(-0.2))


def test_bands_split_the_ratio_by_word_frequency_and_their_parts_add_up_to_it():
    # Ids of WORDS = a b </s> c </s> a a a </s>: </s> 0, a 2, b 3, c 4. The candidate is better by 0.3 nats on
    # a and </s> (ids below 3) and worse by 0.5 on b and c.
    ids = np.array([2, 3, 0, 4, 0, 2, 2, 2, 0])
    baseline = -np.linspace(1.0, 5.0, len(WORDS))
    candidate = baseline + np.where(ids < 3, 0.3, -0.5)
    overall = per_token.compare(WORDS, baseline, candidate, samples=200, seed=3)
    head, tail, empty = per_token.by_band(WORDS, ids, baseline, candidate, [3, 10], samples=200, seed=3)
    assert (head["ids"], tail["ids"], empty["ids"]) == ([0, 3], [3, 10], [10, None])
    assert (head["tokens"], tail["tokens"], empty) == (7, 2, {"ids": [10, None], "tokens": 0, "share": 0.0})
    assert head["share"] == pytest.approx(7 / 9)
    assert head["ratio"] == pytest.approx(math.exp(-0.3)) and tail["ratio"] == pytest.approx(math.exp(0.5))
    assert head["ratio_95"] == pytest.approx([math.exp(-0.3)] * 2)  # the same shift in every unit drawn
    assert head["baseline_perplexity"] == pytest.approx(math.exp(-baseline[ids < 3].mean()))
    assert tail["candidate_perplexity"] == pytest.approx(math.exp(-candidate[ids >= 3].mean()))
    assert head["ln_ratio_part"] == pytest.approx(-0.3 * 7 / 9) and tail["ln_ratio_part"] == pytest.approx(0.5 * 2 / 9)
    assert head["ln_ratio_part"] + tail["ln_ratio_part"] == pytest.approx(math.log(overall["ratio"]))


def test_a_bands_interval_resamples_the_units_and_the_runs_as_compare_does():
    rng = np.random.default_rng(0)
    words = (["w", "v"] * 5 + ["</s>"]) * 40
    ids = np.tile(np.array([2, 5] * 5 + [0]), 40)
    baseline = -rng.uniform(1.0, 6.0, (3, len(words)))
    candidate = baseline + rng.normal(0.0, 0.3, (3, 1)) + np.repeat(rng.normal(0.0, 0.5, 40), 11)
    # With one band (every id below 100), the band is the whole text: compare's own figures, the same draws.
    overall = per_token.compare(words, baseline, candidate, samples=300, seed=5)
    (band, _) = per_token.by_band(words, ids, baseline, candidate, [100], samples=300, seed=5)
    assert band["ratio"] == pytest.approx(overall["ratio"]) and band["ratio_95"] == pytest.approx(overall["ratio_95"])
    assert band["ratio_95"][0] < band["ratio"] < band["ratio_95"][1]


def test_token_ids_come_from_the_vocabulary_or_from_querys_tokens():
    index = {"</s>": 0, "<unk>": 1, "a": 2, "b": 3, "c": 4}
    assert per_token.token_ids(WORDS, "per-token", index, "v.tsv").tolist() == [2, 3, 0, 4, 0, 2, 2, 2, 0]
    with pytest.raises(UserError, match=r"token 4 of the scores, 'c', is not a word of v.tsv"):
        per_token.token_ids(WORDS, "per-token", {k: v for k, v in index.items() if k != "c"}, "v.tsv")
    query = ["The=13", "jury=1459", "</s>", "a=b=1", "</s>=1", "</s>"]
    assert per_token.token_ids(query, "query", None, None).tolist() == [13, 1459, 0, 1, 1, 0]


def test_the_binary_compares_by_band_with_the_models_vocabulary(tmp_path):
    import json

    from pipelines import vocabulary
    from tests import helpers

    words = ("</s>", "<unk>", "a", "b", "c")
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    vocabulary.Vocabulary(words, (3, 0, 4, 1, 1)).save(str(model_dir / "vocab.tsv"))
    paths = [str(tmp_path / name) for name in ("a.tsv", "b.tsv")]
    baseline = -np.arange(1.0, 10.0)
    ids = np.array([2, 3, 0, 4, 0, 2, 2, 2, 0])
    for path, values in zip(paths, (baseline, baseline + np.where(ids < 3, 0.3, -0.5))):
        per_token.write(path, WORDS, values)
    env = helpers.without_tensorflow(tmp_path)

    def compare(*args):
        flags = [f"--baseline={paths[0]}", f"--candidate={paths[1]}", "--samples=50", *args]
        return helpers.run_binary("nplm_tf.compare", *flags, env=env, timeout=120)

    ran = compare("--bands=3", f"--vocab={model_dir}")
    assert ran.returncode == 0, ran.stderr[-2000:]
    head, tail = json.loads(ran.stdout)["bands"]
    assert (head["tokens"], tail["tokens"]) == (7, 2) and tail["ratio"] == pytest.approx(math.exp(0.5))
    (tmp_path / "q.txt").write_text(QUERY, encoding="utf-8")
    query = (f"--baseline={tmp_path}/q.txt", f"--candidate={tmp_path}/q.txt")
    ran = compare(*query, "--bands=2")  # query's output carries the ids: no --vocab
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert [band["tokens"] for band in json.loads(ran.stdout)["bands"]] == [5, 2]
    (tmp_path / "c.tsv").write_text((tmp_path / "a.tsv").read_text().replace("c\t", "d\t"))
    for args, message in [
        ((*query, "--bands=2", f"--vocab={model_dir}"), "--vocab is for per-token files"),
        (("--bands=3",), "--bands with per-token files"),
        ((f"--vocab={model_dir}",), "--vocab is read only with --bands"),
        (("--bands=3,3", f"--vocab={model_dir}"), "bands=3,3 must be positive and increasing."),
        (("--bands=x", f"--vocab={model_dir}"), "bands=x must be whole numbers"),
        (("--bands=5", f"--vocab={model_dir}"), "bands=5 must end below |V| = 5 of"),
        (("--bands=3", f"--vocab={tmp_path}"), "vocab.tsv does not exist"),
        (
            (f"--baseline={tmp_path}/c.tsv", f"--candidate={tmp_path}/c.tsv", "--bands=3", f"--vocab={model_dir}"),
            "token 4 of the scores, 'd', is not a word of",
        ),
    ]:
        ran = compare(*args)
        assert ran.returncode != 0 and ran.stdout == ""
        assert ran.stderr.strip().splitlines()[-1].startswith("error:") and message in ran.stderr, ran.stderr


def test_a_terminal_gets_a_short_table_and_a_pipe_json(tmp_path):
    """On a terminal (`--format=table`, its default there) a table of both perplexities and the ratio with its
    interval, a row per band; piped, one JSON line with the same figures."""
    import json

    from tests import helpers

    paths = [str(tmp_path / name) for name in ("a.tsv", "b.tsv")]
    for path, shift in zip(paths, (0.0, 0.2)):
        per_token.write(path, WORDS, -np.arange(1.0, 10.0) + shift)
    flags = [f"--baseline={paths[0]}", f"--candidate={paths[1]}", "--samples=50"]
    env = helpers.without_tensorflow(tmp_path)
    piped = json.loads(helpers.run_binary("nplm_tf.compare", *flags, env=env).stdout)
    table = helpers.run_binary("nplm_tf.compare", *flags, "--format=table", env=env)
    assert table.returncode == 0, table.stderr[-2000:]
    header, row, note = table.stdout.splitlines()
    assert header.split()[:4] == ["tokens", "count", "baseline", "ppl"]
    low, high = piped["ratio_95"]
    assert row.split() == [
        "all",
        "tokens",
        f"{piped['tokens']:,}",
        f"{piped['baseline_perplexity']:.2f}",
        f"{piped['candidate_perplexity']:.2f}",
        f"{piped['ratio']:.3f}",
        f"{low:.3f}–{high:.3f}",
    ]
    assert note.startswith(f"{piped['units']:,} units, 50 resamplings")
