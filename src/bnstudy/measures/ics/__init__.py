"""bnstudy.measures.ics."""
