"""nplm_tf: the neural probabilistic language model of Bengio et al. (2003) in TensorFlow/Keras.

Submodules are imported on use (`from nplm_tf.network import model`), so the binaries
can configure TensorFlow's logging and devices before TensorFlow loads.
"""

import importlib
import os

__version__ = "0.1.0"

# TensorFlow's default CPU allocator takes each large tensor (a batch's (256, |V|) logits, 42 MB at
# |V| = 40,928) from fresh pages of the OS and returns them after the op, so every such op pays a page
# fault per 4 KiB; on a virtual machine that cost more than the softmax itself. Its BFC allocator reuses
# the memory, which speeds full-softmax training at large |V| (benchmarks.throughput --corpus=gcide). TensorFlow reads the variable when it first creates its devices, so this takes
# effect unless an op ran before nplm_tf was imported; a user's own setting (false) wins.
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")


def __getattr__(name):
    """`nplm_tf.LanguageModel` and `nplm_tf.State` (KenLM's interface) and `nplm_tf.Config`, imported on first
    use."""
    if name in ("LanguageModel", "State", "FullScoreReturn"):
        # on first use, so that running a binary of the package does not load the library behind it
        from nplm_tf.interop import language_model

        return getattr(language_model, name)
    if name == "Config":
        from nplm_tf.core import config  # on first use, as the others

        return config.Config
    if name == "decoders":  # needs pyctcdecode (the asr extra)
        return importlib.import_module("nplm_tf.interop.decoders")
    raise AttributeError(f"module 'nplm_tf' has no attribute {name!r}")
