"""What every part of the library reads: the configuration, the machine's precision, the model directory."""
