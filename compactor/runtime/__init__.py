"""Runtime services shared by every table format: storage (local disk and object stores), the redaction
of storage option values (secrets), the table lease and the crash journal."""
