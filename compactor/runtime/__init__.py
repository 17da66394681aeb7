"""Runtime services shared by every table format: storage (local disk and object stores), the table
lease, and (to come) the crash journal."""
