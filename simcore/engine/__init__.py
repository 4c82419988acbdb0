"""simcore.engine.pipeline."""
