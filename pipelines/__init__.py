"""Text to training windows: corpus readers, vocabulary and the tf.data pipeline."""
