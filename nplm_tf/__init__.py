"""nplm_tf: the neural probabilistic language model of Bengio et al. (2003) in TensorFlow/Keras."""

from nplm_tf.config import Config, ConfigError
from nplm_tf.nplm_layer import NPLMLayer

__all__ = ["Config", "ConfigError", "NPLMLayer"]
__version__ = "0.1.0"
