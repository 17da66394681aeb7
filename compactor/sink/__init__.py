"""Structured Streaming file-sink outputs: manifest logs, planning, safe compaction."""
