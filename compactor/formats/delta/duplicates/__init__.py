"""Rows live twice in a Delta table: found from the lineage of every file in the log, and repaired."""
