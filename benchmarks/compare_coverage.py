"""How often `nplm_tf.compare`'s 95% interval holds the true perplexity ratio, by simulation.

    python -m benchmarks.compare_coverage                      # one to ten runs a model, three run spreads
    python -m benchmarks.compare_coverage --runs=1,3 --run_sd=0.01 --trials=1000

Each trial draws a test text and the runs of two models, scores them with `pipelines.per_token.compare`
and checks whether its interval holds the ratio the models have over all texts and all runs. A token's ln P is

    -3 + a(unit) + e(token) + s(model, run)          (the baseline)
    -3 + a(unit) + e(token) + s(model, run) + d + c(unit)    (the candidate, d nats a token better)

with a ~ N(0, unit_sd) and e ~ N(0, 1) shared by both models (what is hard for one is hard for the other,
so they cancel in the ratio), c ~ N(0, unit_sd / 3) the candidate's own unit effects, which the resampled
units must cover, and s ~ N(0, run_sd) a run's offset (its seed's luck, shared by every token of that run),
which only resampled runs can cover. The default 67 units are as many as Brown's test texts. Brown's full
softmax moved 1.4% between two training seeds (test 164.51 and 162.23): an offset of about 0.01 nats a token.

Prints one JSON line a cell: runs a model, run_sd, and the share of trials whose interval held the truth
(its standard error beside it).
"""

import json
import math

from absl import flags

from pipelines import app
from pipelines.errors import UserError

RUNS = flags.DEFINE_list("runs", ["1", "2", "3", "5", "10"], "Runs a model (training seeds) in each trial.")
RUN_SD = flags.DEFINE_list("run_sd", ["0", "0.01", "0.03"], "Standard deviations of a run's offset, nats a token.")
TRIALS = flags.DEFINE_integer("trials", 300, "Trials a cell.")
UNITS = flags.DEFINE_integer("units", 67, "Units (texts) in a test text.")
UNIT_TOKENS = flags.DEFINE_integer("unit_tokens", 20, "Tokens a unit.")
UNIT_SD = flags.DEFINE_float("unit_sd", 0.3, "Standard deviation of a unit's effect, nats a token.")
DIFFERENCE = flags.DEFINE_float("difference", 0.02, "The candidate's advantage d, nats a token.")
SAMPLES = flags.DEFINE_integer("samples", 400, "Bootstrap resamplings a trial (compare's --samples).")
SEED = flags.DEFINE_integer("seed", 0, "Seed of the simulation.")


def check():
    try:
        runs = [int(r) for r in RUNS.value]
        spreads = [float(s) for s in RUN_SD.value]
    except ValueError:
        raise UserError("--runs must be whole numbers and --run_sd numbers, comma-separated.") from None
    if not runs or min(runs) < 1 or not spreads or min(spreads) < 0:
        raise UserError("--runs must be at least 1 and --run_sd at least 0, one value or more each.")
    if min(TRIALS.value, UNITS.value, UNIT_TOKENS.value, SAMPLES.value) < 1 or UNIT_SD.value < 0:
        raise UserError("--trials, --units, --unit_tokens and --samples must be at least 1, --unit_sd at least 0.")
    return runs, spreads


def trial(rng, runs: int, run_sd: float) -> bool:
    import numpy as np

    from pipelines import per_token

    units, length = UNITS.value, UNIT_TOKENS.value
    words = (["w"] * (length - 1) + ["</s>"]) * units
    shared = -3.0 + np.repeat(rng.normal(0.0, UNIT_SD.value, units), length) + rng.normal(0.0, 1.0, units * length)
    own = DIFFERENCE.value + np.repeat(rng.normal(0.0, UNIT_SD.value / 3, units), length)
    baseline = np.stack([shared + rng.normal(0.0, run_sd) for _ in range(runs)])
    candidate = np.stack([shared + own + rng.normal(0.0, run_sd) for _ in range(runs)])
    low, high = per_token.compare(words, baseline, candidate, SAMPLES.value, int(rng.integers(2**31)))["ratio_95"]
    return low <= math.exp(-DIFFERENCE.value) <= high


def main(argv, checked):
    import numpy as np

    runs_list, spreads = checked
    rng = np.random.default_rng(SEED.value)
    for runs in runs_list:
        for run_sd in spreads:
            held = np.mean([trial(rng, runs, run_sd) for _ in range(TRIALS.value)])
            error = math.sqrt(held * (1 - held) / TRIALS.value)
            print(
                json.dumps(
                    {
                        "runs": runs,
                        "run_sd": run_sd,
                        "coverage": round(float(held), 3),
                        "standard_error": round(error, 3),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    app.run(main, check, tensorflow=False)
