"""Project files: compactor.yml, profiles.yml (targets), selection and vars."""
