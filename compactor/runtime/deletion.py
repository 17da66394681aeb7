"""The one way compactor deletes a table's files: through a gate that proves each one unreferenced first.

compactor deletes in several places (a format's removal of files its log no longer needs, crash
recovery, the outputs of a rewrite that did not commit, the files a format retires after its commit), each from a list: a
dry run's, a journal's, a ledger's. None of those lists is trusted. Right before the delete, the table's
format reads what the table references *now* from its own log (its own replay of the log, its manifests)
and names
every listed file it must keep, with why; only the rest is deleted. A gate that cannot read the table with
certainty raises, and nothing is deleted.

tests/test_deletion_gate_only.py checks that no other code deletes a table's files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from compactor.runtime.storage import Storage


class DeletionGate(Protocol):
    """What a format proves before any of its table's files is deleted."""

    def kept(self, files: Sequence[str], folders: Sequence[str] = ()) -> Mapping[str, str]:
        """Of ``files`` and ``folders`` (deleted whole), relative to the table root, those that must not be
        deleted, each with the reason, judged against the table as it is now."""
        ...


@dataclass(frozen=True)
class Deletion:
    """What a gated delete did: the files and folders deleted, and those kept with the reason."""

    deleted: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    kept: Mapping[str, str] = field(default_factory=dict)


def delete_proved(storage: Storage, gate: DeletionGate, files: Sequence[str] = (),
                  folders: Sequence[str] = ()) -> Deletion:
    """Delete ``files`` and ``folders`` (relative to ``storage``'s root) that ``gate`` does not keep."""
    files, folders = tuple(dict.fromkeys(files)), tuple(dict.fromkeys(folders))
    if not files and not folders:
        return Deletion()
    kept = dict(gate.kept(files, folders))
    doomed = tuple(f for f in files if f not in kept)
    gone = tuple(f for f in folders if f not in kept)
    storage.delete_many(doomed)
    for folder in gone:
        storage.delete_prefix(folder)
    return Deletion(doomed, gone, kept)
