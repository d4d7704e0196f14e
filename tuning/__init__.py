"""keras-tuner searches over the NPLM (hypermodel, search binary)."""
