"""Count-based baselines on the network's vocabulary: modified Kneser-Ney, the paper's interpolated trigram, mixtures."""
