"""measures.jitter."""
