"""A serving client that knows nothing of this project: run as a script by export_test.

    python -I tests/serving_client.py EXPORT_DIR > results.json

Keras, tensorflow-text and this package are made unimportable before
TensorFlow loads, so every signature must run on core TensorFlow alone. Calls
each signature on ordinary and bad inputs and prints the results as JSON.
"""

import json
import sys

for blocked in ("keras", "tf_keras", "tensorflow_text", "nplm_tf", "pipelines", "tuning"):
    sys.modules[blocked] = None  # an import of any of these now raises ImportError

import tensorflow as tf  # noqa: E402

CASES = {
    "plain": ["the cat sees the ball .", "a bird"],
    "empty_string": [""],
    "unknown_only": ["qwzx vbnm"],
    "longer_than_context": ["the cat sees the ball . the dog likes a tree ."],
    "ten_thousand_words": [" ".join((["the", "cat", "sees", "the", "ball", "."] * 1667)[:10_000])],
    "invalid_utf8": [b"the \xff\xfe cat \xc3"],
    "empty_batch": [],
}


def tolist(outputs):
    return {k: v.numpy().tolist() for k, v in outputs.items()}


def decode(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        return {k: decode(v) for k, v in value.items()}
    return value


def main(path):
    model = tf.saved_model.load(path)
    sig = model.signatures
    results = {"signatures": sorted(sig.keys()), "cases": {}}
    for name, texts in CASES.items():
        text = tf.constant(texts, tf.string, shape=[len(texts)])
        results["cases"][name] = decode(
            {
                "next_word": tolist(sig["next_word"](text=text, k=tf.constant(5))),
                "serving_default": tolist(sig["serving_default"](text=text)),
                "score": {k: v for k, v in tolist(sig["score"](text=text)).items() if k != "token_log_probs"}
                | {"token_log_probs_shape": list(sig["score"](text=text)["token_log_probs"].shape)},
                "generate": tolist(
                    sig["generate"](
                        prompt=text,
                        max_tokens=tf.constant(8),
                        temperature=tf.constant(0.8),
                        top_k=tf.constant(3),
                        seed=tf.constant(11, tf.int64),
                        allow_unk=tf.constant(False),
                    )
                ),
            }
        )
    huge_k = sig["next_word"](text=tf.constant(["the"]), k=tf.constant(10**6))
    results["huge_k_width"] = int(huge_k["ids"].shape[1])
    results["huge_k_sum"] = float(tf.reduce_sum(huge_k["probabilities"]).numpy())
    odd = sig["generate"](
        prompt=tf.constant(["the"]),
        max_tokens=tf.constant(-3),
        temperature=tf.constant(-1.0),
        top_k=tf.constant(-2),
        seed=tf.constant(0, tf.int64),
        allow_unk=tf.constant(True),
    )
    results["odd_generate"] = decode(tolist(odd))
    results["imported"] = sorted(
        m for m in ("keras", "tensorflow_text", "nplm_tf", "pipelines") if sys.modules.get(m) is not None
    )
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1])
