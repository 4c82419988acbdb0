"""simcore.cost.parameters."""
