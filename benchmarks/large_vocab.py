"""Full softmax against short lists and sampled training, on one corpus, epochs alternated between variants.

    python -m benchmarks.large_vocab --corpus=gcide --output=runs/large_vocab [--epochs=2] [--variants=...]

Every variant trains the paper's MLP9 shape (n=5, m=30, h=100; batch 256; the training defaults otherwise,
ε_0 too unless --learning_rate sets it)
in OUTPUT/<variant>/, one epoch at a time and in turn (epoch 1 of every variant, then epoch 2 of every
variant, ...), so the host's drifting speed spreads over all of them. After each epoch it records the
training seconds and tokens/s, the exact valid and test perplexity (of the best epoch so far; the runs
are ordinary resumable `nplm_tf.train` directories), and the share of CPU time the host's hypervisor took
meanwhile (`benchmarks.host`: on a virtual machine, tens of percent mean the epoch measured its
neighbours). At the end each variant is exported and served in process, every export in turn over --rounds
rounds: `score` tokens/s at batch 64 (with its ratio to the full softmax's in the same round) and
`next_word` p50, beside a one-op signature called the same way (`serving_lib.call_floor_export`;
--serve_only measures this part again). It prints
one JSON line per epoch and writes OUTPUT/large_vocab.json and OUTPUT/large_vocab.md, and with
--readme=benchmarks/README.md puts the table there between its markers. A rerun continues.
"""

import json
import os
import time

from absl import flags

from benchmarks import host
from pipelines import app, corpus_flags


def variants(shortlists: list[int], num_sampled: int) -> dict[str, dict]:
    """name -> Config changes: the full softmax, each short list in every tail mode, sampled softmax and NCE."""
    found = {"softmax": {}}
    for n in shortlists:
        for tail in ("class", "backoff", "network"):
            found[f"shortlist_{n}_{tail}"] = {"shortlist": n, "tail": tail}
    for loss in ("sampled_softmax", "nce"):
        found[f"{loss}_{num_sampled}"] = {"loss": loss, "num_sampled": num_sampled}
    return found


OUTPUT = app.define_path("output", None, "Directory for every variant's run and the results.", required=True)
EPOCHS = flags.DEFINE_integer("epochs", 2, "Epochs per variant.")
SHORTLISTS = flags.DEFINE_list("shortlists", ["2000", "4000", "8000"], "Short-list sizes N to compare.")
NUM_SAMPLED = flags.DEFINE_integer(
    "num_sampled",
    500,
    "Noise words per batch of the sampled variants (GCIDE, 2 epochs: 100 ends 5.5% above the "
    "full softmax's test perplexity, 500 within 1%).",
)
NAMES = flags.DEFINE_list("variants", None, "Run only these variants (default: all; names as printed).")
MIN_COUNT = flags.DEFINE_integer("min_count", 4, "Words seen fewer times in train become <unk>.")
LEARNING_RATE = flags.DEFINE_float("learning_rate", None, "ε_0 of every variant (default: training's, 1e-3).")
SERVE = flags.DEFINE_boolean("serve", True, "Also export each variant and measure score and next_word.")
REQUESTS = flags.DEFINE_integer("requests", 500, "Timed next_word requests per variant.")
BATCHES = flags.DEFINE_integer("batches", 40, "Timed score batches of 64 texts per variant.")
ROUNDS = flags.DEFINE_integer("rounds", 5, "Serving is timed in this many rounds, every variant in turn in each.")
SERVE_ONLY = flags.DEFINE_boolean(
    "serve_only", False, "Only measure serving again (the runs and large_vocab.json exist)."
)
README = app.define_path(
    "readme", None, "Also put the table into this file (benchmarks/README.md), between its large_vocab markers."
)
BEGIN, END = "<!-- large_vocab table: begin -->", "<!-- large_vocab table: end -->"


def readme_page(path: str) -> str:
    """The page --readme names, refused at once unless it holds the table's markers."""
    from pipelines.errors import UserError

    if not os.path.isfile(path):
        raise UserError(f"--readme={path} is not a file; give benchmarks/README.md or a page with the table's markers.")
    with open(path, encoding="utf-8") as f:
        page = f.read()
    if BEGIN not in page or END not in page:
        raise UserError(f"{path} has no '{BEGIN}' ... '{END}' block to put the table in.")
    return page


def put_table(path: str, text: str) -> None:
    from pipelines import files

    head, rest = readme_page(path).split(BEGIN, 1)
    files.write_text(path, head + BEGIN + "\n" + text + rest[rest.index(END) :])


def epoch_row(metrics: dict) -> dict:
    last = metrics["epochs"][-1]
    return {
        "epoch": last["epoch"],
        "seconds": round(last["seconds"], 1),
        "tokens_per_second": round(last["tokens_per_second"]),
        "valid_perplexity": round(last["valid_perplexity"], 2),
        "best_epoch": metrics["best_epoch"],
        "test_perplexity": round(metrics["test_perplexity"], 2),
    }


def table(
    results: dict, corpus_name: str, vocab_size: int, call_floor: dict | None = None, learning_rate: float = 1e-3
) -> str:
    lines = [
        f"Corpus {corpus_name}, |V| = {vocab_size:,}; MLP9 shape, batch 256, ε_0 = {learning_rate:g}. Per epoch: "
        "training seconds, tokens/s, exact valid perplexity, and exact test perplexity of the best epoch so far. "
        "Serving (in process, every export timed in turn over several rounds): score tokens/s at batch 64 (against "
        "the full softmax in the same round: median; range) and next_word p50 for one text. CPU steal: the share of "
        "the host's CPU time its hypervisor took during the epoch's call (training and scoring; `benchmarks.host`).",
        "",
        "| variant | epoch | seconds | tokens/s | valid ppl | test ppl | CPU steal | score tokens/s (batch 64) "
        "| next_word p50 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    reference = ((results.get("softmax") or {}).get("serving") or {}).get("score_rounds")
    for name, result in results.items():
        served = result.get("serving") or {}
        for i, row in enumerate(result["epochs"]):
            last = i == len(result["epochs"]) - 1
            score = f"{served['score_tokens_per_second']:,}" if last and served else ""
            if score and reference and name != "softmax":
                ratios = sorted(a / b for a, b in zip(served["score_rounds"], reference))
                score += f" ({ratios[len(ratios) // 2]:.1f}×; {ratios[0]:.1f}–{ratios[-1]:.1f}×)"
            p50 = f"{served['next_word_ms']['p50']:.2f} ms" if last and served else ""
            steal = row.get("cpu_steal")  # None: not measured (not Linux, or an older run's row)
            stolen = "" if steal is None else f"{steal:.0%}"
            lines.append(
                f"| {name} | {row['epoch']} | {row['seconds']:.0f} | {row['tokens_per_second']:,} | "
                f"{row['valid_perplexity']:.2f} | {row['test_perplexity']:.2f} | {stolen} | {score} | {p50} |"
            )
    if call_floor:
        lines += [
            "",
            f"A signature of one op, called the same way in the same rounds: next_word p50 "
            f"{call_floor['next_word_ms']['p50']:.2f} ms (what any request costs in Python and the TensorFlow "
            "runtime before a model's ops run).",
        ]
    return "\n".join(lines) + "\n"


def recorded(names: list[str]) -> tuple[dict, int]:
    """What the last run of OUTPUT recorded for `names` (their epochs, without serving) and |V|."""
    from nplm_tf.core.config import ConfigError
    from nplm_tf.core.run_dir import RunDir
    from pipelines import files

    path = os.path.join(OUTPUT.value, "large_vocab.json")
    saved = files.read_json(path)["results"] if os.path.isfile(path) else {}
    missing = [name for name in names if name not in saved]
    if missing:
        raise ConfigError(f"--serve_only needs a finished run of {missing} in {OUTPUT.value}; run without it first.")
    vocab_size = RunDir(os.path.join(OUTPUT.value, names[0])).read_metrics()["vocab_size"]
    return {name: {k: v for k, v in saved[name].items() if k != "serving"} for name in names}, vocab_size


def base_config():
    """What every variant shares: the defaults at --min_count, and patience beyond the last epoch."""
    from nplm_tf.core.config import Config

    rate = {} if LEARNING_RATE.value is None else {"learning_rate": LEARNING_RATE.value}
    return Config(min_count=MIN_COUNT.value, patience=EPOCHS.value + 1, **rate)


def check_data(base, configs: list, corpus) -> int:
    """|V|, once every split is checked and every variant's config (N and K) against it (in the flag check,
    before TensorFlow loads)."""
    from nplm_tf.training.data import prepare_vocabulary

    vocab_size = prepare_vocabulary(base, corpus).size
    for config in configs:
        config.check_vocab_size(vocab_size)
    return vocab_size


def train_in_turn(names: list[str], every: dict[str, dict], corpus) -> dict:
    """Trains every variant one epoch at a time, in turn; returns what each epoch recorded."""
    from nplm_tf.training import trainer

    base = base_config()
    results = {name: {"config": every[name], "epochs": []} for name in names}
    for epoch in range(1, EPOCHS.value + 1):
        for name in names:
            config = base.replace(epochs=epoch, **every[name])
            start, cpu = time.perf_counter(), host.cpu_times()
            metrics = trainer.train_and_evaluate(config, os.path.join(OUTPUT.value, name), corpus, export=False)
            row = epoch_row(metrics)
            row["call_seconds"] = round(time.perf_counter() - start, 1)
            steal = host.steal_share(cpu, host.cpu_times())  # the hypervisor's share over the call
            row["cpu_steal"] = None if steal is None else round(steal, 3)
            results[name]["epochs"].append(row)
            if "valid_log_normalizer" in metrics:
                results[name]["valid_log_normalizer"] = metrics["valid_log_normalizer"]
            print(json.dumps({"variant": name, **row}), flush=True)
    return results


def check_flags() -> tuple[dict[str, dict], list[str], object, dict | None, int]:
    """Every variant's changes, the names to run, the corpus, what the last run recorded (--serve_only; else
    None) and |V|, once the flag values and the data or the recorded runs are checked (without TensorFlow:
    `app.run` calls it first, so that nothing is refused after minutes of loading or hours of training)."""
    from nplm_tf.core.config import ConfigError
    from pipelines import files

    files.check_output_dir("output", OUTPUT.value)
    if README.value:
        readme_page(README.value)
    every = variants(app.positive_ints(SHORTLISTS), NUM_SAMPLED.value)
    names = NAMES.value or list(every)
    unknown = sorted(set(names) - set(every))
    if unknown:
        raise ConfigError(
            f"unknown variants {unknown}; choose from {list(every)} (--shortlists and --num_sampled set the numbers)."
        )
    if EPOCHS.value < 1:
        raise ConfigError(f"epochs={EPOCHS.value} must be at least 1.")
    base = base_config()
    configs = [base.replace(**every[name]) for name in names]  # each variant's settings, as train checks them
    if not 1 <= ROUNDS.value <= min(REQUESTS.value, BATCHES.value):
        raise ConfigError(
            f"rounds={ROUNDS.value} must be at least 1 and at most requests={REQUESTS.value} and "
            f"batches={BATCHES.value} (each round times some of both)."
        )
    corpus = corpus_flags.corpus_from_flags()
    if SERVE_ONLY.value:
        return every, names, corpus, *recorded(names)
    return every, names, corpus, None, check_data(base, configs, corpus)


def main(argv, checked):
    from benchmarks import serving_lib
    from nplm_tf.core.run_dir import RunDir
    from nplm_tf.serving import saved_model
    from pipelines import corpus as corpus_lib
    from pipelines import files

    every, names, corpus, results, vocab_size = checked  # results: --serve_only's, as the last run recorded them
    if results is None:
        results = train_in_turn(names, every, corpus)
    # the runs' own ε_0 (under --serve_only, the training run's, whatever --learning_rate says now)
    rate = RunDir(os.path.join(OUTPUT.value, names[0])).read_metrics()["config"]["learning_rate"]
    call_floor = None
    if SERVE.value:
        words = [w for line in corpus["test"].iter_lines() for w in corpus_lib.tokenize(line)]
        exports = {}
        for name in names:
            run = RunDir(os.path.join(OUTPUT.value, name))
            versions = sorted(int(v) for v in os.listdir(run.export_dir)) if os.path.isdir(run.export_dir) else []
            exports[name] = (
                os.path.join(run.export_dir, str(versions[-1])) if versions else saved_model.export(run.path)
            )
        served = serving_lib.measure_alternated(
            exports, words, REQUESTS.value, BATCHES.value, ROUNDS.value, call_floor=True
        )
        call_floor = served.pop(serving_lib.CALL_FLOOR)
        print(json.dumps({serving_lib.CALL_FLOOR: call_floor["next_word_ms"]}), flush=True)
        for name in names:
            results[name]["serving"] = served[name]
            print(json.dumps({"variant": name, **served[name]}), flush=True)
    files.write_json(
        os.path.join(OUTPUT.value, "large_vocab.json"),
        {"corpus": corpus.name, "learning_rate": rate, "results": results, "call_floor": call_floor},
    )
    text = table(results, corpus.name, vocab_size, call_floor, rate)
    files.write_text(os.path.join(OUTPUT.value, "large_vocab.md"), text)
    if README.value:
        put_table(README.value, text)


if __name__ == "__main__":
    app.run(main, check_flags, resumable=True)
