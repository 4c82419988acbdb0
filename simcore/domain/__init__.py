"""simcore.domain."""
