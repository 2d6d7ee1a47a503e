"""Both document stores for the security tests that are about the store: the embedded SQLite store always,
Elasticsearch when ``CITEBOT_TEST_ELASTICSEARCH_URL`` is set (the same switch as the contract suite)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connectors.settings import Settings
from connectors.stores import open_store
from tests.helpers.stores import STORE_KINDS, drop_store, store_settings


@pytest.fixture(params=STORE_KINDS)
def any_store_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    return Settings(**store_settings(request.param, tmp_path))


@pytest.fixture
def any_store(any_store_settings: Settings) -> Iterator[Any]:
    store = open_store(any_store_settings)
    yield store
    drop_store(store)
