"""Applying a Delta plan: the action runner, compactor's rewrite and its one commit path, Delta's own
OPTIMIZE and VACUUM, and what happens around a commit."""
