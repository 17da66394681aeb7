"""The formats the contract suite runs over: the registered ones the adapters know (Delta, the file sink)
and the toy format, registered here for the length of each test (``register_format``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from compactor.models.formats import register_format
from tests.formats.contract.adapters import ADAPTERS, Adapter
from tests.formats.contract.lake import Lake


def registered(adapter: Adapter) -> ExitStack:
    """The adapter's format registered until the stack closes (nothing to do for a built-in format)."""
    stack = ExitStack()
    if adapter.spec is not None:
        stack.enter_context(register_format(adapter.spec))
    return stack


@pytest.fixture(params=ADAPTERS, ids=[a.name for a in ADAPTERS])
def adapter(request: pytest.FixtureRequest) -> Iterator[Adapter]:
    with registered(request.param):
        yield request.param


@pytest.fixture
def lake(adapter: Adapter, tmp_path: Path) -> Lake:
    lake = Lake(adapter, tmp_path)
    lake.create()
    return lake


@pytest.fixture
def now(lake: Lake) -> dt.datetime:
    """The plan's clock, once the table is written (a file sink's writer guard compares its logs' times)."""
    return dt.datetime.now(dt.UTC)
