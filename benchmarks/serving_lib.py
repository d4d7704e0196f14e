"""In-process serving figures of SavedModels: next_word latency, score throughput and, when asked,
generate's tokens per second (no flags).

`measure` times one export; `measure_alternated` times several in turn, round after round, so that the
host's drifting speed spreads over all of them and their ratios are taken within a round. With
`call_floor=True` it also times `call_floor_export`, whose signatures have the same names and inputs but
hold a single op each: what any request costs in Python and the TensorFlow runtime before a model's ops run.
"""

import os
import tempfile
import time

import numpy as np

MIN_WORDS = 26  # the fewest words requests can be cut from: one 25-word score piece (and next_word prefixes)
GENERATE_TOKENS = 20  # max_tokens of each timed generate call
GENERATE_BATCH = 64


class Probe:
    """One loaded export and its requests: `next_word` on one text (k=10), `score` at batch 64 and, when
    `generations` > 0, `generate` with its defaults (temperature 1, every word) for one prompt and for 64.

    Args:
      export_dir: the SavedModel version directory.
      words: the text the requests are cut from (prefixes of 1-19 words; 25-word pieces for score).
      requests: next_word prefixes (plus 100 for warm-up).
      batches: score batches (plus 3 for warm-up).
      generations: generate calls of each kind (plus 3 for warm-up), up to GENERATE_TOKENS words each;
        the batched ones take GENERATE_BATCH prompts.
    """

    def __init__(self, export_dir: str, words: list[str], requests: int, batches: int, generations: int = 0):
        import tensorflow as tf

        rng = np.random.default_rng(0)
        served = tf.saved_model.load(export_dir)
        self.next_word, self.score = served.signatures["next_word"], served.signatures["score"]
        self.generate = served.signatures["generate"] if generations else None
        starts, lengths = rng.integers(0, len(words) - 20, requests + 100), rng.integers(1, 20, requests + 100)
        self.prefixes = [tf.constant([" ".join(words[s : s + n])]) for s, n in zip(starts, lengths)]
        pieces = [" ".join(words[s : s + 25]) for s in range(0, len(words) - 25, 25)]
        pieces = pieces * -(-64 * (batches + 3) // len(pieces))  # a small test split is cycled
        self.chunks = [tf.constant(pieces[i : i + 64]) for i in range(0, 64 * (batches + 3), 64)]
        self.k = tf.constant(10)
        for text in self.prefixes[:100]:  # warm-up
            self.next_word(text=text, k=self.k)["words"].numpy()
        for batch in self.chunks[:3]:
            self.score(text=batch)["log_prob"].numpy()
        self.prefixes, self.chunks = self.prefixes[100:], self.chunks[3:]
        self.prompts = [  # (one prompt, GENERATE_BATCH prompts) per generation, each from the same prefixes
            (
                tf.constant([" ".join(words[s : s + 8])]),
                tf.constant([" ".join(words[s + i : s + i + 8]) for i in range(GENERATE_BATCH)]),
            )
            for s in rng.integers(0, max(len(words) - 80, 1), generations + 3 if generations else 0)
        ]
        for i in range(min(3, len(self.prompts))):  # warm-up
            for batch in (0, 1):
                self.generated(i, batch)
        self.prompts = self.prompts[3:]

    def generated(self, i: int, batch: int) -> int:
        """Tokens generated for prompt set i (batch 0: one prompt; 1: GENERATE_BATCH prompts), seed i: the words, and
        `</s>` where a row drew it (as score counts predicted tokens)."""
        import tensorflow as tf

        out = self.generate(
            prompt=self.prompts[i][batch],
            max_tokens=tf.constant(GENERATE_TOKENS),
            temperature=tf.constant(1.0),
            top_k=tf.constant(0),
            seed=tf.constant(i, tf.int64),
            allow_unk=tf.constant(False),
        )
        words = out["generated_tokens"].numpy()
        return int(words.sum() + (words < GENERATE_TOKENS).sum())

    def latencies(self, part: slice) -> list[float]:
        """Seconds per next_word request, for the prefixes in `part`."""
        found = []
        for text in self.prefixes[part]:
            start = time.perf_counter()
            self.next_word(text=text, k=self.k)["words"].numpy()
            found.append(time.perf_counter() - start)
        return found

    def throughput(self, part: slice) -> tuple[int, float]:
        """(predicted tokens, seconds) of score over the batches in `part`."""
        tokens, start = 0, time.perf_counter()
        for batch in self.chunks[part]:
            tokens += int(self.score(text=batch)["lengths"].numpy().sum())
        return tokens, time.perf_counter() - start

    def generation(self, part: slice, batch: int) -> tuple[int, float]:
        """(generated tokens, seconds) of generate over the prompt sets in `part` (batch as `generated`)."""
        tokens, start = 0, time.perf_counter()
        for i in range(len(self.prompts))[part]:
            tokens += self.generated(i, batch)
        return tokens, time.perf_counter() - start


def summary(latencies: list[float], tokens: int, seconds: float, generated=None) -> dict:
    """The figures of one export; `generated`: (tokens, seconds) for one prompt and for 64, when timed."""
    ms = np.array(latencies) * 1e3
    rates = {}
    if generated is not None:
        (one, one_s), (many, many_s) = generated
        rates = {
            "generate_tokens_per_second": {
                "one_prompt": round(one / one_s),
                f"batch_{GENERATE_BATCH}": round(many / many_s),
            }
        }
    return {
        "next_word_ms": {
            "p50": round(float(np.percentile(ms, 50)), 3),
            "p99": round(float(np.percentile(ms, 99)), 3),
            "mean": round(float(ms.mean()), 3),
            "requests": len(latencies),
        },
        "score_tokens_per_second": round(tokens / seconds),
        "score_batch": 64,
        "score_tokens": tokens,
        **rates,
    }


def measure(export_dir: str, words: list[str], requests: int = 2000, batches: int = 40, generations: int = 0) -> dict:
    """next_word latency (one text, k=10) over `requests` prefixes of `words`, score tokens/s at batch 64, and
    with `generations` > 0 generate's tokens per second (the words and any `</s>`) for one prompt and for 64."""
    probe = Probe(export_dir, words, requests, batches, generations)
    generated = [probe.generation(slice(None), b) for b in (0, 1)] if generations else None
    return summary(probe.latencies(slice(None)), *probe.throughput(slice(None)), generated)


CALL_FLOOR = "call_floor"


def call_floor_export(directory: str) -> str:
    """Writes a SavedModel whose `next_word` and `score` take what a model's do and run one op each (the words'
    lengths); returns its path."""
    import tensorflow as tf

    class Floor(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([], tf.int32)])
        def next_word(self, text, k):
            return {"words": tf.strings.length(text) + k}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def score(self, text):
            lengths = tf.strings.length(text)
            return {"lengths": lengths, "log_prob": lengths}

    module = Floor()
    path = os.path.join(directory, CALL_FLOOR)
    tf.saved_model.save(module, path, signatures={"next_word": module.next_word, "score": module.score})
    return path


def measure_alternated(
    exports: dict[str, str],
    words: list[str],
    requests: int,
    batches: int,
    rounds: int,
    call_floor: bool = False,
    generations: int = 0,
) -> dict:
    """`measure` for every export, in `rounds` rounds: each round times a share of every export's requests,
    batches and generations, export after export. Each result adds its score tokens/s per round
    (`score_rounds`), its next_word p50 in ms per round (`next_word_p50_rounds`) and, with `generations`, its
    generated tokens/s per round (`generate_rounds`: one prompt, then 64). With `call_floor`, the results also
    hold CALL_FLOOR: `call_floor_export` timed in the same rounds (next_word and score only)."""
    with tempfile.TemporaryDirectory() as directory:  # a loaded SavedModel no longer reads its directory
        if call_floor:
            exports = {**exports, CALL_FLOOR: call_floor_export(directory)}
        probes = {
            name: Probe(path, words, requests, batches, 0 if name == CALL_FLOOR else generations)
            for name, path in exports.items()
        }
    latencies = {name: [] for name in exports}  # per round: the round's next_word latencies
    done = {name: [] for name in exports}  # (tokens, seconds) per round
    generated = {name: [] for name in exports}  # per round: ((tokens, seconds) one prompt, (tokens, seconds) 64)
    share = lambda total, r: slice(r * total // rounds, (r + 1) * total // rounds)  # noqa: E731
    for r in range(rounds):
        for name, probe in probes.items():
            latencies[name].append(probe.latencies(share(requests, r)))
            done[name].append(probe.throughput(share(batches, r)))
            if probe.generate is not None:
                generated[name].append(tuple(probe.generation(share(generations, r), b) for b in (0, 1)))
    results = {}
    for name in exports:
        tokens, seconds = sum(t for t, _ in done[name]), sum(s for _, s in done[name])
        rates = None
        if generated[name]:
            rates = [tuple(map(sum, zip(*(g[b] for g in generated[name])))) for b in (0, 1)]
        results[name] = {
            **summary([t for part in latencies[name] for t in part], tokens, seconds, rates),
            "score_rounds": [round(t / s) for t, s in done[name]],
            "next_word_p50_rounds": [round(float(np.percentile(part, 50)) * 1e3, 3) for part in latencies[name]],
        }
        if generated[name]:
            results[name]["generate_rounds"] = [[round(w / s) for w, s in g] for g in generated[name]]
    return results
