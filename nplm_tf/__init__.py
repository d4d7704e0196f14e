"""nplm_tf: the neural probabilistic language model of Bengio et al. (2003) in TensorFlow/Keras.

Submodules are imported on use (`from nplm_tf import model`), so the binaries
can configure TensorFlow's logging and devices before TensorFlow loads.
"""

__version__ = "0.1.0"
