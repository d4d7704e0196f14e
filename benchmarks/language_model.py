"""`nplm_tf.LanguageModel` as a decoder calls it, beside the `kenlm` module on an ARPA file.

    NLTK_DATA=../shared/nltk_data python -m benchmarks.language_model --model_dir=runs/mlp9 --arpa=runs/kn5/model.arpa

Three measurements, each alternated with KenLM's `Model.BaseScore` doing the same calls (`--rounds` times,
the median kept):
- cached: `BaseScore` calls whose contexts repeat as in a beam search (a beam of --beam hypotheses, each
  extended by --words_per_state words, over contexts whose distributions are cached);
- new contexts one at a time: every call a context not seen before (the cache holds none of them);
- new contexts in batches of --batch (`prefetch` of the batch's states, then its `BaseScore` calls).
The last two twice on one model, --contexts new contexts each: cold (a fresh model, its cache empty) and
warm (right after, the cache full and dropping its least recent contexts: a decoder's steady state, where the
memory of dropped distributions is reused instead of fresh memory being touched page by page). The contexts
are Brown test sentences' prefixes. Prints one JSON object; targets (issue 76): ≥ 200,000 cached calls/s,
≥ 3,000 new contexts/s one at a time, ≥ 30,000/s in batches of 64.

--raw adds `LanguageModel(MODEL_DIR, normalized=False)` (`nplm_raw`): the raw output y_w from the precomputed
first layer, for a self-normalized model (`train --self_normalize`, `--loss=nce`), and prints the tables'
memory. Target (issue 95): ≥ 200,000 new contexts/s one at a time, ≥ 30× the exact path's in the same run.
"""

from __future__ import annotations

import json
import statistics
import time

from absl import flags

from pipelines import app
from pipelines.errors import UserError

MODEL_DIR = app.define_path("model_dir", None, "A directory written by nplm_tf.train.", required=True)
ARPA = app.define_path("arpa", None, "An ARPA file for the kenlm module (e.g. runs/kn5/model.arpa).")
ROUNDS = flags.DEFINE_integer("rounds", 3, "Alternated rounds.")
CONTEXTS = flags.DEFINE_integer("contexts", 2000, "New contexts per measurement.")
BATCH = flags.DEFINE_integer("batch", 64, "Contexts per batch.")
BEAM = flags.DEFINE_integer("beam", 32, "Hypotheses in the beam of the cached measurement.")
WORDS_PER_STATE = flags.DEFINE_integer("words_per_state", 100, "Words asked after each cached context.")
RAW = flags.DEFINE_boolean("raw", False, "Also time raw scoring (normalized=False) of the model.")


def check() -> None:
    from nplm_tf.core import run_dir

    for flag in (ROUNDS, CONTEXTS, BATCH, BEAM, WORDS_PER_STATE):
        if flag.value < 1:
            raise UserError(f"--{flag.name}={flag.value} must be at least 1.")
    run_dir.check_trained(MODEL_DIR.value)
    if ARPA.value:
        import os

        if not os.path.isfile(ARPA.value):
            raise UserError(f"--arpa={ARPA.value} does not exist.")


def states_of(model, state_class, sentences: list[list[str]], count: int) -> list:
    """`count` states after distinct sentence prefixes, with the words that follow them."""
    out, seen = [], set()
    for words in sentences:
        state = state_class()
        model.BeginSentenceWrite(state)
        for i, word in enumerate(words):
            key = tuple(words[max(0, i - 5) : i])
            if key not in seen:
                seen.add(key)
                out.append((state, word))
                if len(out) == count:
                    return out
            following = state_class()
            model.BaseScore(state, word, following)
            state = following
    return out


def new_contexts_per_second(model, pairs: list, batch: int, prefetch: bool) -> float:
    """`BaseScore` of each (state, word) pair, whose contexts the model has not seen, `batch` at a time (each
    batch's states given to `prefetch` first where `prefetch`)."""
    out = type(pairs[0][0])()
    start = time.perf_counter()
    for lo in range(0, len(pairs), batch):
        chunk = pairs[lo : lo + batch]
        if prefetch and batch > 1:
            model.prefetch([s for s, _ in chunk])
        for state, word in chunk:
            model.BaseScore(state, word, out)
    return len(pairs) / (time.perf_counter() - start)


def main(argv, checked):
    import nplm_tf
    from nplm_tf.core import run_dir
    from pipelines import corpus_flags

    run = run_dir.RunDir(MODEL_DIR.value)
    test = corpus_flags.corpus_from_flags(run.read_corpus(), MODEL_DIR.value)["test"]
    sentences = [s.split() for text in test.iter_lines() for s in text.split(" . ") if s.split()]
    vocab_words = [w for w in run.load_vocab().words[2:502]]
    if len(sentences) < 3:
        raise UserError(f"{MODEL_DIR.value}'s test split has {len(sentences)} sentences; the benchmark needs 3.")

    def ours(name: str, **kwargs):
        return nplm_tf.LanguageModel(MODEL_DIR.value, mixture=False, normalized=name != "nplm_raw", **kwargs)

    models = {"nplm": (ours("nplm"), nplm_tf.State)}
    if RAW.value:
        models["nplm_raw"] = (ours("nplm_raw"), nplm_tf.State)
    if ARPA.value:
        import kenlm

        models["kenlm"] = (kenlm.Model(ARPA.value), kenlm.State)
    figures = {name: {kind: [] for kind in ("cached", "new", "new_warm", "batched", "batched_warm")} for name in models}
    for _ in range(ROUNDS.value):
        for name, (model, state_class) in models.items():
            fresh = ours(name, cache_size=4096) if name != "kenlm" else model
            beam = [s for s, _ in states_of(fresh, state_class, sentences, BEAM.value)]
            out = state_class()
            for state in beam:  # the beam's contexts computed once
                fresh.BaseScore(state, vocab_words[0], out)
            words = vocab_words[: WORDS_PER_STATE.value]
            start = time.perf_counter()
            for state in beam:
                for word in words:
                    fresh.BaseScore(state, word, out)
            figures[name]["cached"].append(len(beam) * len(words) / (time.perf_counter() - start))

            for kind, part, batch in (("new", 1, 1), ("batched", 2, BATCH.value)):
                start_at = min(1000 * part, len(sentences) * part // 3)  # other sentences than the beam's
                fresh = ours(name) if name != "kenlm" else model
                pairs = states_of(fresh, state_class, sentences[start_at:], 2 * CONTEXTS.value)
                if name != "kenlm":
                    fresh._cache.clear()
                half = len(pairs) // 2
                ours_ = name != "kenlm"
                figures[name][kind].append(new_contexts_per_second(fresh, pairs[:half], batch, ours_))
                figures[name][kind + "_warm"].append(new_contexts_per_second(fresh, pairs[half:], batch, ours_))
    result = {
        "model_dir": MODEL_DIR.value,
        "arpa": ARPA.value,
        "batch": BATCH.value,
        **{
            name: {kind: round(statistics.median(values)) for kind, values in kinds.items()}
            | {f"{kind}_rounds": [round(v) for v in values] for kind, values in kinds.items()}
            for name, kinds in figures.items()
        },
        "unit": "BaseScore calls per second (new: new contexts per second)",
    }
    if RAW.value:
        network = models["nplm_raw"][0].network
        result["raw_over_exact_new"] = round(result["nplm_raw"]["new"] / result["nplm"]["new"], 1)
        result["premultiplied_bytes"] = network.premultiplied_bytes()
    print(json.dumps(result, indent=2))


def run():
    app.run(main, check, tensorflow=False)


if __name__ == "__main__":
    run()
