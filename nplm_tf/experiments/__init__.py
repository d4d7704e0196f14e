"""Experiments built from the library: the paper's Table 1."""
