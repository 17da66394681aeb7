"""Exit codes (documented in README). Only the CLI exits the process."""

OK = 0
#: validate: invalid policies; apply: an action failed or failed verification; plan: table errors or
#: duplicate rewrites; repair: a table could not be repaired
FAILURE = 1
#: usage or internal error (bad options, missing project, unexpected exception)
USAGE = 2
#: plan --detailed-exitcode (Terraform): 0 no changes, 1 error, 2 changes present
PLAN_ERROR = 1
PLAN_CHANGES = 2
#: the reader of stdout went away (``compactor debug | head -1``): 128 + SIGPIPE, as a tool the signal ends
BROKEN_PIPE = 141
#: Ctrl-C (128 + SIGINT)
INTERRUPTED = 130


def for_error(code: str) -> int:
    """The exit code of a CompactorError by its ``code``: invalid policies fail (1), as `validate` does;
    every other error is a usage error (2)."""
    return FAILURE if code == "policy" else USAGE
