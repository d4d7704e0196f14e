"""Shell tools on a trained model: KenLM-style query, n-best rescoring, generation, word neighbours."""
