"""Per-token files and their paired bootstrap comparison (`nplm_tf.compare`)."""

import math

import numpy as np
import pytest

from nplm_tf.tools import per_token
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
