"""simcore.planning."""
