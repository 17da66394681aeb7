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
