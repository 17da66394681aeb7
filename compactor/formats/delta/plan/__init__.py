"""Delta's plan (PURE): its plan words (actions, skip reasons, blockers), the planner, retention and
which tables each engine can compact."""
