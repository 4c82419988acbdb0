"""simcore.cost."""
