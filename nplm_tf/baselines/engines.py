"""The two engines that compute probabilities, for code written once for both: NumPy (the tools,
`LanguageModel`, evaluation's mixtures) and TensorFlow (the SavedModel's graphs).

Arithmetic, comparisons, slicing and `[..., None]` read the same in both; the few operations that differ are
methods of an engine, `NUMPY` or `TENSORFLOW`. `TENSORFLOW` loads TensorFlow when first used, so a module that
names it loads nothing heavy.
"""

from __future__ import annotations

import importlib

import numpy as np


class Numpy:
    name = "numpy"

    @staticmethod
    def gather(table, rows):
        """table[rows]: the rows of `table` (an array, a list) at each index of `rows`."""
        return np.asarray(table)[rows]

    @staticmethod
    def as_int(mask):
        """A boolean array as 0/1 integers."""
        return np.asarray(mask).astype(np.int64)


class TensorFlow:
    name = "tensorflow"

    @staticmethod
    def gather(table, rows):
        return _tf().gather(table, rows)

    @staticmethod
    def as_int(mask):
        tf = _tf()
        return tf.cast(mask, tf.int32)


def _tf():
    return importlib.import_module("tensorflow")


NUMPY, TENSORFLOW = Numpy(), TensorFlow()
