"""Policy front end: load YAML with positions, render Jinja, validate, build typed TablePolicy models."""
