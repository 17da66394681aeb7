"""Run a Plan: preconditions, engines, verification, run results."""
