"""Apache Iceberg tables, through pyiceberg (no JVM): catalogs (catalog.py), a table's state (state.py,
live.py), the local rewrite of one bin (rewrite.py) and the ``replace`` commit of planned bins (replace.py,
the one module pinned to pyiceberg's private API). Not registered as a format yet: the registry line, the
TableFormat object, its plan words and planner come with the format-neutral core's table identity."""
