"""`compactor init`: scaffold a new project that validates."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from compactor.errors import UsageError

#: project file -> template (under compactor/templates) or, for schemas, the packaged schema file
FILES = {
    "compactor.yml": "init_compactor.yml",
    "profiles.yml": "init_profiles.yml",
    "policies/example.yml": "init_policy.yml",
    # editors resolve the policy file's `$schema` comment to this copy: offline, versioned with the
    # project, refreshed with `compactor schema > schemas/policy.schema.json` after an upgrade
    "schemas/policy.schema.json": "schema:policy.schema.json",
}


def schema_text(name: str) -> str:
    """A JSON Schema shipped with the package, as text (ends with a newline; format enums filled in)."""
    from compactor.policy.schema import schema_text as text

    return text(name)


def init_project(directory: Path) -> list[Path]:
    directory = Path(directory)
    existing = [directory / rel for rel in FILES if (directory / rel).exists()]
    if existing:
        raise UsageError(f"refusing to overwrite existing file(s): {', '.join(map(str, existing))}",
                         hint="choose an empty directory")
    written = []
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in directory.resolve().name) or "compactor_project"
    for rel, template in FILES.items():
        if template.startswith("schema:"):
            text = schema_text(template.removeprefix("schema:"))
        else:
            text = resources.files("compactor").joinpath("templates", template).read_text(encoding="utf-8")
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("__NAME__", name), encoding="utf-8")
        written.append(path)
    return written
