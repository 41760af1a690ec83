"""bnstudy.measures.smoothness."""
