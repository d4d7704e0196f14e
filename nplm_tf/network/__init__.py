"""The network of equation (1): the layer, the model and its loss, the optimizers, exact scoring."""
