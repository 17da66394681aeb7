"""Engines behind one small interface: local (pyarrow) and spark. pyspark is imported lazily."""
