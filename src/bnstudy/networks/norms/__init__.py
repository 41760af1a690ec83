"""networks.norms."""
