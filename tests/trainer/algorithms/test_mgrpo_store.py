"""The M-GRPO shared store against real backends: SQLite (WAL) files and a real redis-server."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import time

import pytest
from mgrpo_helpers import NO_REDIS_REASON, REDIS_SERVER, redis_server

from trainers.algorithms.mgrpo.store import SQLiteStore, StoreTimeout, open_store


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    if REDIS_SERVER is None:
        pytest.skip(NO_REDIS_REASON)
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite://{tmp_path / 'store.db'}"
    return request.getfixturevalue("redis_url")


def test_round_trip_namespaces_and_wal(store_url, request):
    namespace = request.node.name
    with open_store(store_url, namespace=namespace) as store, open_store(store_url, namespace="other") as other:
        record = {"main_reward": 1.2, "correct": True, "delegation_rewards": [0.5, -0.5], "sub_delegations": [0, 1]}
        store.put_many({"0/outcome/3/1": record, "0/main_stats": {"groups": 2}})
        assert store.get("0/outcome/3/1", timeout=1, waiting_for="main") == record
        store.put("0/main_stats", {"groups": 3})  # replaces
        assert store.try_get("0/main_stats") == {"groups": 3}
        assert store.try_get("0/missing") is None
        assert store.keys("0/") == ["0/main_stats", "0/outcome/3/1"]
        assert other.try_get("0/main_stats") is None and other.keys() == []
    if store_url.startswith("sqlite"):
        with sqlite3.connect(store_url.removeprefix("sqlite://")) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_get_blocks_until_the_other_side_writes(store_url, request):
    namespace = request.node.name
    writer = multiprocessing.get_context("spawn").Process(target=_late_writer, args=(store_url, namespace))
    with open_store(store_url, namespace=namespace) as store:
        writer.start()
        start = time.monotonic()
        assert store.get("late", timeout=30, waiting_for="writer") == {"ok": 1}
        assert time.monotonic() - start >= 0.3
    writer.join(10)
    assert writer.exitcode == 0


def _late_writer(url: str, namespace: str) -> None:
    time.sleep(0.5)
    with open_store(url, namespace=namespace) as store:
        store.put("late", {"ok": 1})


def test_timeout_names_the_key_and_the_other_side(store_url, request):
    with open_store(store_url, namespace=request.node.name) as store:
        with pytest.raises(StoreTimeout, match=r"'3/sub_stats'.*sub side never wrote a heartbeat") as info:
            store.get("3/sub_stats", timeout=0.2, waiting_for="sub")
        assert info.value.key == "3/sub_stats" and info.value.waiting_for == "sub"
        store.heartbeat("sub")
        with pytest.raises(StoreTimeout, match=r"sub side's last heartbeat was \d+\.\d s ago"):
            store.get("3/sub_stats", timeout=0.1, waiting_for="sub")


WRITERS, BATCHES, PER_BATCH = 4, 25, 8


def _writer(url: str, namespace: str, writer: int) -> None:
    with open_store(url, namespace=namespace) as store:
        for b in range(BATCHES):
            store.put_many({f"w{writer}/b{b}/{i}": {"writer": writer, "batch": b, "i": i} for i in range(PER_BATCH)})


def test_concurrent_writers_lose_nothing(store_url, request):
    namespace = request.node.name
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(store_url, namespace, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with open_store(store_url, namespace=namespace) as store:
        keys = store.keys()
        assert len(keys) == WRITERS * BATCHES * PER_BATCH
        for w in range(WRITERS):
            assert store.try_get(f"w{w}/b{BATCHES - 1}/{PER_BATCH - 1}") == {"writer": w, "batch": BATCHES - 1,
                                                                            "i": PER_BATCH - 1}


def _endless_writer(url: str, namespace: str) -> None:
    """A 'trainer' that writes large all-or-nothing batches until it is killed."""
    payload = "x" * 2000
    with open_store(url, namespace=namespace) as store:
        store.heartbeat("sub")
        b = 0
        while True:
            store.put_many({f"b{b}/{i}": {"batch": b, "pad": payload} for i in range(200)})
            b += 1


def test_killed_writer_leaves_the_store_consistent_and_the_reader_times_out(store_url, request):
    namespace = request.node.name
    proc = multiprocessing.get_context("spawn").Process(target=_endless_writer, args=(store_url, namespace))
    proc.start()
    with open_store(store_url, namespace=namespace) as store:
        store.get("b2/0", timeout=60, waiting_for="sub")  # it is writing
        os.kill(proc.pid, signal.SIGKILL)  # mid-write, almost surely: it does nothing else
        proc.join(10)
        assert proc.exitcode == -signal.SIGKILL
        if isinstance(store, SQLiteStore):
            assert store.integrity() == "ok"
        batches: dict[str, int] = {}
        for key in store.keys("b"):
            batch = key.split("/")[0]
            batches[batch] = batches.get(batch, 0) + 1
        assert len(batches) >= 3 and set(batches.values()) == {200}  # every batch whole, none partial
        last = max(int(b[1:]) for b in batches)
        store.put("after_crash", 1)  # still writable
        assert store.try_get("after_crash") == 1
        with pytest.raises(StoreTimeout, match=rf"'b{last + 1}/0'.*sub side's last heartbeat"):
            store.get(f"b{last + 1}/0", timeout=0.3, waiting_for="sub")
