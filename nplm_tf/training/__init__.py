"""Training with Keras `fit`: the data it streams, its callbacks, resumable backups, the whole run."""
