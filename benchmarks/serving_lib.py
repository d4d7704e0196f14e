"""In-process serving figures of SavedModels: next_word latency and score throughput (no flags).

`measure` times one export; `measure_alternated` times several in turn, round after round, so that the
host's drifting speed spreads over all of them and their ratios are taken within a round. With
`call_floor=True` it also times `call_floor_export`, whose signatures have the same names and inputs but
hold a single op each: what any request costs in Python and the TensorFlow runtime before a model's ops run.
"""

import os
import tempfile
import time

import numpy as np


class Probe:
    """One loaded export and its requests: `next_word` on one text (k=10) and `score` at batch 64.

    Args:
      export_dir: the SavedModel version directory.
      words: the text the requests are cut from (prefixes of 1-19 words; 25-word pieces for score).
      requests: next_word prefixes (plus 100 for warm-up).
      batches: score batches (plus 3 for warm-up).
    """

    def __init__(self, export_dir: str, words: list[str], requests: int, batches: int):
        import tensorflow as tf

        rng = np.random.default_rng(0)
        served = tf.saved_model.load(export_dir)
        self.next_word, self.score = served.signatures["next_word"], served.signatures["score"]
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


def summary(latencies: list[float], tokens: int, seconds: float) -> dict:
    ms = np.array(latencies) * 1e3
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
    }


def measure(export_dir: str, words: list[str], requests: int = 2000, batches: int = 40) -> dict:
    """next_word latency (one text, k=10) over `requests` prefixes of `words`, and score tokens/s at batch 64."""
    probe = Probe(export_dir, words, requests, batches)
    return summary(probe.latencies(slice(None)), *probe.throughput(slice(None)))


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
    exports: dict[str, str], words: list[str], requests: int, batches: int, rounds: int, call_floor: bool = False
) -> dict:
    """`measure` for every export, in `rounds` rounds: each round times a share of every export's requests and
    batches, export after export. Each result adds its score tokens/s per round (`score_rounds`). With
    `call_floor`, the results also hold CALL_FLOOR: `call_floor_export` timed in the same rounds."""
    with tempfile.TemporaryDirectory() as directory:  # a loaded SavedModel no longer reads its directory
        if call_floor:
            exports = {**exports, CALL_FLOOR: call_floor_export(directory)}
        probes = {name: Probe(path, words, requests, batches) for name, path in exports.items()}
    latencies = {name: [] for name in exports}
    done = {name: [] for name in exports}  # (tokens, seconds) per round
    for r in range(rounds):
        for name, probe in probes.items():
            latencies[name] += probe.latencies(slice(r * requests // rounds, (r + 1) * requests // rounds))
            done[name].append(probe.throughput(slice(r * batches // rounds, (r + 1) * batches // rounds)))
    results = {}
    for name in exports:
        tokens, seconds = sum(t for t, _ in done[name]), sum(s for _, s in done[name])
        results[name] = {
            **summary(latencies[name], tokens, seconds),
            "score_rounds": [round(t / s) for t, s in done[name]],
        }
    return results
