"""Engines behind one small interface: local (delta-rs) and spark. pyspark is imported lazily."""
