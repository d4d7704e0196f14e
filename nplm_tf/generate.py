"""Continues a prompt with the model, through the same code as the SavedModel's `generate` signature.

    python -m nplm_tf.generate --model_dir=runs/mlp9 --prompt="The jury said" --num_samples=3 --seed=1

Prints one continuation per line. `--temperature` ≤ 0 is greedy; `--top_k` ≤ 0 samples from every word;
`<unk>` is never chosen unless --allow_unk (the other words' probabilities are renormalized). With the same
prompt(s), seed and settings the text equals the signature's (of an export in the same `--precision`, in
either precision: the binary runs the signature's own traced graph); a fitted mixture (mixture.json) is used
as the export uses it, unless --nomixture. --numpy generates without TensorFlow (`interop.generation`, the
same rules, NumPy's draws: the same seed gives the same text there, not the export's).

The continuations are made 256 at a time (`sampling.GENERATE_ROWS`) and printed as they come: the first 256
are the signature's rows for --seed, each later group the signature's rows for a seed derived from (--seed,
group), so any --num_samples runs in the memory of one group (as one batch, a million rows of Brown's 14,118
float32 outputs are 56 GB a step, and 2·10⁹ rows of a 302-word model ended in a segmentation fault).
"""

import math

from absl import flags

from nplm_tf.core import run_dir
from nplm_tf.core.config import ConfigError
from nplm_tf.engines import NUMPY
from nplm_tf.interop import generation
from nplm_tf.interop.language_model import LanguageModel
from nplm_tf.network import loading
from nplm_tf.tools import model_flags
from pipelines import app

MODEL_DIR = app.define_path("model_dir", None, "A directory written by nplm_tf.train.", required=True)
PROMPT = flags.DEFINE_string("prompt", "", "The text to continue (tokenized as in training).")
MAX_TOKENS = flags.DEFINE_integer("max_tokens", 20, "Most words to add (stops earlier at </s>).")
TEMPERATURE = flags.DEFINE_float("temperature", 1.0, "Sampling temperature; <= 0 is greedy.")
TOP_K = flags.DEFINE_integer("top_k", 0, "Sample among the k most probable words (next_word's k best); <= 0: all.")
SEED = flags.DEFINE_integer("seed", 0, "Seed of the (stateless) sampling: the same seed gives the same text.")
NUM_SAMPLES = flags.DEFINE_integer(
    "num_samples", 1, "Continuations of the prompt (made and printed 256 at a time, each group its own seed)."
)
ALLOW_UNK = flags.DEFINE_boolean("allow_unk", False, "Let <unk> be generated.")
IN_NUMPY = flags.DEFINE_boolean(
    "numpy", False, "Generate in NumPy without TensorFlow (interop.generation): other draws than the export's."
)
MIXTURE = flags.DEFINE_boolean("mixture", True, "Use the n-gram mixture when MODEL_DIR/mixture.json exists.")
PRECISION = model_flags.precision_flag("Generate")


def check() -> None:
    """The flag values and that --model_dir holds a trained model, before TensorFlow loads."""
    if NUM_SAMPLES.value < 1 or MAX_TOKENS.value < 0:
        raise ConfigError(f"num_samples={NUM_SAMPLES.value} must be >= 1 and max_tokens={MAX_TOKENS.value} >= 0.")
    if math.isnan(TEMPERATURE.value):
        raise ConfigError("temperature=nan must be a number (<= 0: greedy).")
    if not -(2**63) <= SEED.value < 2**63:
        raise ConfigError(f"seed={SEED.value} must fit in 64 bits (the signature's int64 seed).")
    if IN_NUMPY.value and PRECISION.value is not None:
        raise ConfigError(f"--numpy computes in float32; drop --precision={PRECISION.value}.")
    run_dir.check_trained(MODEL_DIR.value)


def main(argv, checked):
    if IN_NUMPY.value:
        model = LanguageModel(MODEL_DIR.value, mixture=MIXTURE.value)
        for i in range(NUM_SAMPLES.value):
            args = (MAX_TOKENS.value, TEMPERATURE.value, TOP_K.value, NUMPY.derived_seed(SEED.value, i))
            text = generation.generate(model, PROMPT.value, *args, allow_unk=ALLOW_UNK.value)
            print(" ".join(part for part in (PROMPT.value, text) if part), flush=True)
        return
    app.import_tensorflow_quietly()
    # deferred: TensorFlow loads when this runs, not with the module
    import tensorflow as tf

    from nplm_tf.serving import sampling, saved_model, server

    _, vocab, model = loading.load_trained(MODEL_DIR.value, PRECISION.value)
    ngram, _ = saved_model.load_mixture(MODEL_DIR.value, vocab) if MIXTURE.value else (None, None)
    serving = server.Server(model, vocab, run_dir.RunDir(MODEL_DIR.value).vocab_path, ngram)
    # Traced as the export traces it (the signature's inputs, no AutoGraph: the server's control flow is
    # Python's), so that the graph optimizer rewrites the same graph the same way: run eagerly, the ops went
    # unfused, and a bfloat16 model drew other words than its signature on CPUs with bfloat16 kernels.
    generate = tf.function(serving.generate, input_signature=saved_model.generate_signature(), autograph=False)
    for group, start in enumerate(range(0, NUM_SAMPLES.value, sampling.GENERATE_ROWS)):
        rows = min(sampling.GENERATE_ROWS, NUM_SAMPLES.value - start)
        out = generate(
            tf.constant([PROMPT.value] * rows),
            tf.constant(MAX_TOKENS.value),
            tf.constant(TEMPERATURE.value, tf.float32),
            tf.constant(TOP_K.value),
            tf.constant(NUMPY.derived_seed(SEED.value, group), tf.int64),
            tf.constant(ALLOW_UNK.value),
        )
        print("\n".join(text.decode("utf-8") for text in out["text"].numpy()), flush=True)


def run():
    app.run(main, check, tensorflow=False)  # loaded in `main` unless --numpy


if __name__ == "__main__":
    run()
