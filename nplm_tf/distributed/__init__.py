"""Training past one process: strategies, the synchronous multi-worker loop, local SGD, collectives."""
