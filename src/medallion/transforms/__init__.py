"""Pure DataFrame -> DataFrame transformations: no streams, checkpoints or files."""
