"""measures.partition."""
