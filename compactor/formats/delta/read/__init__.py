"""Reading a Delta table: its state through delta-rs, and compactor's own replay of its log (the
files it references, the deletion gate, VACUUM's listing)."""
