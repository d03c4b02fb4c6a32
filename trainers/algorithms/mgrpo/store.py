"""The shared store through which M-GRPO's two trainer processes exchange statistics.

The main-agent and sub-agent trainers share no weights, gradients or tensors: only small
JSON records keyed by strings such as ``"3/outcome/7/1"`` (step 3, question 7, rollout 1),
written with :meth:`Store.put_many` (all records of one call appear together or not at all)
and read with :meth:`Store.get`, which blocks until the key exists and otherwise raises
:class:`StoreTimeout` naming the key, the side expected to write it and when that side
last sent a heartbeat.

* :class:`SQLiteStore` (default, ``sqlite:///path/run.db`` or a plain path): one file in
  WAL mode, so readers never block the writer; each ``put_many`` is one ``BEGIN
  IMMEDIATE`` transaction, so a process killed mid-write leaves no partial record set.
  For processes on one machine (or a shared disk with working locks).
* :class:`RedisStore` (``redis://host:port/db`` or ``unix:///path.sock``): for trainers on
  several machines; ``put_many`` is one ``MSET`` (atomic in Redis).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: First and longest sleep between polls of a blocking :meth:`Store.get`, in seconds.
POLL_MIN_S, POLL_MAX_S = 0.002, 0.05


class StoreTimeout(TimeoutError):
    """A blocking read found no record in time: the other side is slow, stuck or dead."""

    def __init__(self, key: str, waiting_for: str, timeout: float, heartbeat_age: float | None) -> None:
        if heartbeat_age is None:
            last = f"the {waiting_for} side never wrote a heartbeat"
        else:
            last = f"the {waiting_for} side's last heartbeat was {heartbeat_age:.1f} s ago"
        super().__init__(f"no record {key!r} after {timeout:.1f} s waiting for the {waiting_for} side; {last} "
                         f"(did the {waiting_for} trainer crash or stop?)")
        self.key, self.waiting_for, self.timeout, self.heartbeat_age = key, waiting_for, timeout, heartbeat_age


def heartbeat_key(side: str) -> str:
    return f"heartbeat/{side}"


class Store(ABC):
    """Key -> JSON value records shared by processes (see the module docstring). Every key
    is stored as ``namespace:key``, so runs sharing one store never see each other's records."""

    namespace: str

    def full_key(self, key: str) -> str:
        return f"{self.namespace}:{key}"

    @abstractmethod
    def _write(self, rows: Mapping[str, str]) -> None:
        """Write full key -> JSON text rows atomically (all or none)."""

    @abstractmethod
    def _read(self, full_key: str) -> str | None:
        """The JSON text under ``full_key``, or None."""

    @abstractmethod
    def _scan(self, full_prefix: str) -> list[str]:
        """Full keys starting with ``full_prefix``."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

    def put_many(self, records: Mapping[str, Any]) -> None:
        """Write every record atomically (all or none), replacing existing keys."""
        self._write({self.full_key(k): json.dumps(v) for k, v in records.items()})

    def try_get(self, key: str) -> Any | None:
        """The value of ``key``, or None when it does not exist (yet)."""
        raw = self._read(self.full_key(key))
        return None if raw is None else json.loads(raw)

    def keys(self, prefix: str = "") -> list[str]:
        """This namespace's keys starting with ``prefix``, sorted (diagnostics and tests)."""
        start = len(self.namespace) + 1
        return sorted(k[start:] for k in self._scan(self.full_key(prefix)))

    def put(self, key: str, value: Any) -> None:
        self.put_many({key: value})

    def heartbeat(self, side: str) -> None:
        """Record that ``side`` is alive now (wall-clock time; machines' clocks should agree)."""
        self.put(heartbeat_key(side), time.time())

    def get(self, key: str, *, timeout: float, waiting_for: str) -> Any:
        """Block until ``key`` exists and return its value; :class:`StoreTimeout` after
        ``timeout`` seconds. ``waiting_for`` names the side that writes the key."""
        deadline = time.monotonic() + timeout
        pause = POLL_MIN_S
        while True:
            value = self.try_get(key)
            if value is not None:
                return value
            if time.monotonic() >= deadline:
                beat = self.try_get(heartbeat_key(waiting_for))
                raise StoreTimeout(key, waiting_for, timeout, None if beat is None else time.time() - float(beat))
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, POLL_MAX_S)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SQLiteStore(Store):
    """One SQLite file in WAL mode; safe across processes (each opens its own connection,
    reopened after a fork)."""

    def __init__(self, path: str | Path, *, namespace: str = "mgrpo", busy_timeout_s: float = 30.0) -> None:
        self.path, self.namespace = Path(path), namespace
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.busy_timeout_s = busy_timeout_s
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._connection()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a commit survives a process crash
            conn.execute("CREATE TABLE IF NOT EXISTS records (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def _write(self, rows: Mapping[str, str]) -> None:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("INSERT OR REPLACE INTO records (key, value) VALUES (?, ?)", list(rows.items()))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _read(self, full_key: str) -> str | None:
        row = self._connection().execute("SELECT value FROM records WHERE key = ?", (full_key,)).fetchone()
        return None if row is None else str(row[0])

    def _scan(self, full_prefix: str) -> list[str]:
        rows = self._connection().execute("SELECT key FROM records WHERE substr(key, 1, ?) = ?",
                                          (len(full_prefix), full_prefix))
        return [r[0] for r in rows]

    def integrity(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` result: ``"ok"`` for a sound file."""
        return str(self._connection().execute("PRAGMA integrity_check").fetchone()[0])

    def close(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"


class RedisStore(Store):
    """Records in a Redis server under ``namespace:``; needs the ``redis`` client
    (the mgrpo extra: ``pip install -e '.[mgrpo]'`` in a checkout)."""

    def __init__(self, url: str, *, namespace: str = "mgrpo") -> None:
        import redis

        self.url, self.namespace = url, namespace
        self.client = redis.Redis.from_url(url)
        self.client.ping()

    def _write(self, rows: Mapping[str, str]) -> None:
        self.client.mset(dict(rows))

    def _read(self, full_key: str) -> str | None:
        raw = self.client.get(full_key)
        return None if raw is None else raw.decode()

    def _scan(self, full_prefix: str) -> list[str]:
        escaped = "".join("\\" + c if c in "*?[]\\" else c for c in full_prefix)
        return [k.decode() for k in self.client.scan_iter(match=escaped + "*")]

    def close(self) -> None:
        self.client.close()

    def __repr__(self) -> str:
        return f"RedisStore({self.url!r}, namespace={self.namespace!r})"


def open_store(url: str, *, namespace: str = "mgrpo") -> Store:
    """``sqlite:///path.db`` or a plain path: :class:`SQLiteStore`; ``redis://`` /
    ``rediss://`` / ``unix://``: :class:`RedisStore`; both with ``namespace``."""
    if url.startswith(("redis://", "rediss://", "unix://")):
        return RedisStore(url, namespace=namespace)
    return SQLiteStore(url.removeprefix("sqlite://"), namespace=namespace)
