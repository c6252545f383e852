"""The inbox under store faults: its worker is supervised and its health shown (``/healthz``,
the pages' header), and a database outage is 503 with Retry-After, quickly, not 404."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from interlude.errors import ConfigurationError
from interlude.server import create_app
from interlude.sessions import SQLiteStore
from tests.support import wait_for
from tests.workers.flaky import FlakyStore

from . import inbox_app
from .conftest import ANA, TOKENS, bearer
from .test_pages import login


def test_the_inbox_worker_is_restarted_and_its_health_shown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = FlakyStore(SQLiteStore(tmp_path / "s.db"))
    qid = inbox_app.pause("ops", "t1", store)
    asgi = create_app(store, inbox_app.app, tokens=TOKENS, worker=True, poll=0.02)
    with TestClient(asgi) as http:
        assert http.get("/healthz").json()["ok"] is True
        # the store fails: the worker stays up, says so, and /healthz is 503
        store.queries_fail = 10_000
        wait_for(lambda: http.get("/healthz").status_code == 503, what="/healthz to say 503")
        health = http.get("/healthz")
        assert health.status_code == 503
        assert health.headers["retry-after"] and health.json()["worker"]["running"] is True
        assert health.json()["worker"]["store_ok"] is False
        login(http)
        assert "cannot reach the store" in http.get("/").text
        r = http.post(
            "/api/sessions/t1/answers", json={"answers": {qid: True}}, headers=bearer(ANA)
        )
        assert r.status_code == 202  # recorded while the worker cannot list its work
        # the worker stops with an error: it is logged at once and started again
        with caplog.at_level("ERROR", logger="interlude.server"):
            store.queries_fail, store.error = 1, ConfigurationError
            wait_for(lambda: asgi.state.interlude.supervisor.restarts == 1, what="a restart")
            assert any("worker stopped" in r.message for r in caplog.records)
        wait_for(lambda: inbox_app.RUNS == ["deploy web 1.2.3"], what="the tool to run")
        wait_for(lambda: http.get("/healthz").status_code == 200, what="/healthz to say 200")
        body = http.get("/healthz").json()
        assert body["ok"] and body["worker"]["restarts"] == 1 and body["worker"]["running"]
        assert "cannot reach the store" not in http.get("/").text
        assert inbox_app.RUNS == ["deploy web 1.2.3"]  # once: not again after the restart


def test_a_database_outage_is_503_with_retry_after_quickly_not_404() -> None:
    from interlude.sessions import PostgresStore
    from tests.support.postgres import cluster

    with cluster() as db:
        store = PostgresStore(db.dsn, pool_timeout=1.0)  # the default is 3 s
        qid = inbox_app.pause("ops", "t1", store)
        with TestClient(create_app(store, tokens=TOKENS)) as http:
            assert http.get("/api/sessions/t1", headers=bearer()).status_code == 200
            db.stop("immediate")
            answer = {"answers": {qid: True}}
            for method, path, body in [
                ("GET", "/api/sessions/t1", None),
                ("GET", "/api/pending", None),
                ("POST", "/api/sessions/t1/answers", answer),
            ]:
                started = time.monotonic()
                r = http.request(method, path, json=body, headers=bearer())
                took = time.monotonic() - started
                assert r.status_code == 503, (path, r.status_code, r.text)
                assert r.headers["retry-after"] == "5" and took < 3, (path, took)
                assert r.headers["content-type"] == "application/json"
                assert "unavailable" in r.json()["error"]
            assert http.get("/healthz").status_code == 503
            db.start()
            # the pool's connections died with the server: new ones within seconds
            started = time.monotonic()

            def back() -> bool:
                return http.get("/api/sessions/t1", headers=bearer()).is_success

            wait_for(back, what="the API to answer again", timeout=10)
            assert http.get("/api/sessions/t1", headers=bearer()).status_code == 200
            assert time.monotonic() - started < 6
            r = http.post("/api/sessions/t1/answers", json=answer, headers=bearer())
            assert r.status_code == 202
            assert http.get("/healthz").json()["ok"] is True
        store.close()
