"""The two engines that compute probabilities, so that each piece of the model is written once for both:
NumPy (the tools, `LanguageModel`, evaluation's mixtures) and TensorFlow (scoring in training, the
SavedModel's graphs).

Arithmetic, comparisons, slicing and `[..., None]` read the same on arrays and tensors; every operation that
is spelled differently is a method of an engine, `NUMPY` or `TENSORFLOW`, with the same meaning in both. Each
engine computes a softmax as it best can (NumPy sums float32 exps in float64; TensorFlow runs its fused
kernels): the numbers agree to float32's rounding. `TENSORFLOW` loads TensorFlow when first used, so naming
it loads nothing heavy.
"""

from nplm_tf.engines.numpy_engine import NUMPY  # noqa: F401
from nplm_tf.engines.tensorflow_engine import TENSORFLOW  # noqa: F401
