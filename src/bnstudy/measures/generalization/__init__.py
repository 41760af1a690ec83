"""bnstudy.measures.generalization."""
