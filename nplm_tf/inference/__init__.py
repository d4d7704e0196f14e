"""Inference without TensorFlow: equation (1) and the output heads in NumPy, from a run's saved weights."""
