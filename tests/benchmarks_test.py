"""The measurement scripts: a short real run, and one sentence for a bad flag value."""

import json

import pytest

from tests import helpers


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
        ("benchmarks.optimizer", "--steps=0", "steps=0 and repeats=3 must be at least 1"),
        ("benchmarks.scaling", "--repeats=0", "repeats=0, workers=2 and steps=160 must be at least 1"),
        ("benchmarks.scaling", "--balance_workers", "balance_workers=True needs sync_every > 1"),
    ],
)
def test_bad_flag_values_are_one_sentence(module, flag, message):
    result = helpers.run_binary(module, flag)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    errors = helpers.error_lines(result.stderr)
    assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]
