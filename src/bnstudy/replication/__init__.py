"""Replication rounds: seeds added to an experiment until its claims are decided."""
