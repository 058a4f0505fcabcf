"""PostgresStore: the store contract, plus what only a shared PostgreSQL server has to prove."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tickwork.stores import Store
from tickwork.stores.postgres import PostgresStore

from .store_contract import StoreContract


class TestPostgresContract(StoreContract):
    @pytest.fixture
    def open_store(self, pg_dsn: str, pg_schema: str) -> Iterator[Callable[[], Store]]:
        opened: list[PostgresStore] = []

        def open_store() -> Store:
            opened.append(PostgresStore(pg_dsn, schema=pg_schema))
            return opened[-1]

        yield open_store
        for s in opened:
            s.close()
