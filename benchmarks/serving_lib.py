"""In-process serving figures of a SavedModel: next_word latency and score throughput (no flags)."""

import time

import numpy as np


def measure(export_dir: str, words: list[str], requests: int = 2000, batches: int = 40) -> dict:
    """next_word latency (one text, k=10) over `requests` prefixes of `words`, and score tokens/s at batch 64."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    served = tf.saved_model.load(export_dir)
    next_word, score = served.signatures["next_word"], served.signatures["score"]
    prefixes = [
        " ".join(words[s : s + n])
        for s, n in zip(rng.integers(0, len(words) - 20, requests + 100), rng.integers(1, 20, requests + 100))
    ]
    k = tf.constant(10)
    latencies = []
    for i, text in enumerate(prefixes):
        t = tf.constant([text])
        start = time.perf_counter()
        next_word(text=t, k=k)["words"].numpy()
        if i >= 100:  # warm-up
            latencies.append(time.perf_counter() - start)
    ms = np.array(latencies) * 1e3

    pieces = [" ".join(words[s : s + 25]) for s in range(0, len(words) - 25, 25)]
    pieces = pieces * -(-64 * (batches + 3) // len(pieces))  # a small test split is cycled
    chunks = [tf.constant(pieces[i : i + 64]) for i in range(0, 64 * (batches + 3), 64)]
    for b in chunks[:3]:
        score(text=b)["log_prob"].numpy()
    tokens, start = 0, time.perf_counter()
    for b in chunks[3:]:
        tokens += int(score(text=b)["lengths"].numpy().sum())
    seconds = time.perf_counter() - start
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
