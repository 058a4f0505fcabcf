"""``tickwork run --http``: ``/metrics`` and ``/healthz``, and `DurableScheduler.health`.

The endpoint is tested in-process (a `StatusServer` on a free port, with a stand-in
health source) and end to end (a real daemon process serving its own figures).
"""

from __future__ import annotations

import contextlib
import io
import textwrap
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter

from tests import forked
from tests.test_daemon_e2e import LIMIT, Run, wait_until
from tickwork import DurableScheduler
from tickwork._daemon.start import DaemonConfig, run_daemon
from tickwork._daemon.web.http import StatusServer, is_loopback, parse_address
from tickwork._daemon.web.status_page import LIVE_HASH
from tickwork.stores import StoreError
from tickwork.stores.sqlite import SQLiteStore


@dataclass
class Fake:
    ok: bool = True
    reason: str | None = None

    def health(self) -> Any:
        return self


def get(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("127.0.0.1:9120", ("127.0.0.1", 9120)),
        (":9120", ("127.0.0.1", 9120)),
        ("9120", ("127.0.0.1", 9120)),
        ("[::1]:0", ("::1", 0)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
    ],
)
def test_addresses(text: str, want: tuple[str, int]) -> None:
    assert parse_address(text) == want


@pytest.mark.parametrize("text", ["", "host:", "host:http", ":70000", "a b:1"])
def test_bad_addresses_say_what_is_wrong(text: str) -> None:
    with pytest.raises(ValueError, match=f"--http must be HOST:PORT.*got {text!r}"):
        parse_address(text)


def test_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")


def test_healthz_is_200_or_503_with_the_reason_and_metrics_are_served() -> None:
    registry = CollectorRegistry()
    Counter("probe", "A counter.", registry=registry).inc(3)
    health = Fake()
    server = StatusServer(("127.0.0.1", 0), registry, health)
    server.start()
    try:
        assert get(server.url + "/healthz") == (200, "ok\n")
        health.ok, health.reason = False, "the store failed 3 time(s) in a row: boom"
        assert get(server.url + "/healthz") == (
            503,
            "unhealthy: the store failed 3 time(s) in a row: boom\n",
        )
        code, text = get(server.url + "/metrics")
        assert code == 200 and "probe_total 3.0" in text
        assert get(server.url + "/nothing")[0] == 404
    finally:
        server.close()


def test_a_token_guards_everything_but_healthz_and_readyz() -> None:
    why: list[str | None] = ["starting: the jobs are not declared yet"]
    server = StatusServer(
        ("127.0.0.1", 0), CollectorRegistry(), Fake(), token="s3cret", ready=lambda: why[0]
    )
    server.start()
    try:
        assert get(server.url + "/metrics")[0] == 401
        assert get(server.url + "/metrics", token="wrong")[0] == 401
        assert get(server.url + "/metrics", token="s3cret")[0] == 200
        assert get(server.url + "/healthz") == (200, "ok\n")
        assert get(server.url + "/readyz") == (
            503,
            "not ready: starting: the jobs are not declared yet\n",
        )
        why[0] = None
        assert get(server.url + "/readyz") == (200, "ready\n")
    finally:
        server.close()


# -- DurableScheduler.health ------------------------------------------------------------


class BrokenStore(SQLiteStore):
    """Its claims fail while ``broken`` is set."""

    broken = False

    def claim_due(self, *args: Any, **kwargs: Any) -> Any:
        if self.broken:
            raise StoreError("claim due jobs: database is locked")
        return super().claim_due(*args, **kwargs)


def test_health_follows_the_loop_and_the_store(tmp_path: Path) -> None:
    store = BrokenStore(tmp_path / "s.db")
    ds = DurableScheduler(store, poll=0.05)
    assert not ds.health().ok and ds.health().reason == "not started"
    ds.start()
    try:
        wait_until("a healthy look", lambda: ds.health().ok)
        store.broken = True
        h = wait_until("an unhealthy look", lambda: (h := ds.health()).store_failures and h)
        assert not h.ok and "database is locked" in (h.reason or "")
        assert h.store_errors >= 1
        store.broken = False
        wait_until("healthy again", lambda: ds.health().ok)
        assert ds.health().store_errors >= 1 and ds.health().lost_claims == 0
    finally:
        ds.stop()
        store.close()
    assert ds.health().reason == "stopping"


class StuckStore(SQLiteStore):
    """Its claims wait for ``release`` while ``stuck`` is set (a lock held elsewhere)."""

    stuck = False

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered = threading.Event()
        self.release = threading.Event()

    def claim_due(self, *args: Any, **kwargs: Any) -> Any:
        if self.stuck:
            self.entered.set()
            self.release.wait(60)
        return super().claim_due(*args, **kwargs)


def test_health_says_when_a_look_has_waited_health_after_for_the_store(tmp_path: Path) -> None:
    from tickwork.testing import FakeClock

    clock = FakeClock()
    store = StuckStore(tmp_path / "s.db")
    with pytest.raises(ValueError, match="health_after must be a finite number > 0, got -1"):
        DurableScheduler(store, health_after=-1)
    assert DurableScheduler(store).health_after == 5.0  # the default, as the daemon's
    assert DurableScheduler(store, health_after=4.5).health_after == 4.5  # its liveness log's
    ds = DurableScheduler(store, poll=0.05, monotonic_clock=clock, health_after=5.0)
    ds.start()
    try:
        wait_until("a healthy look", lambda: ds.health().ok)
        store.stuck = True
        assert store.entered.wait(60)
        clock.advance(4.9)  # waited, not yet health_after
        h = ds.health()
        assert h.ok and h.store_waiting == pytest.approx(4.9)
        clock.advance(0.2)
        h = ds.health()
        assert (h.ok, h.reason) == (
            False,
            "the store has not answered for 5 s (a look at the due runs)",
        )
        store.stuck = False
        store.release.set()
        wait_until("healthy again", lambda: ds.health().ok)
        assert ds.health().store_waiting is None or ds.health().store_waiting < 5.0
    finally:
        store.release.set()
        ds.stop()
        store.close()


# -- the daemon ------------------------------------------------------------------------


def test_the_daemon_serves_its_metrics_and_health(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        textwrap.dedent(
            """
            [[job]]
            name = "tick"
            every = "200ms"
            command = ["true"]

            [[job]]
            name = "fail"
            every = "300ms"
            command = ["false"]
            """
        )
    )
    run = Run(jobs, tmp_path / "s.sqlite3", "--http", "127.0.0.1:0", "--for", "60s")
    try:
        line = run.wait_line("metrics at http://127.0.0.1:")
        base = line.split("metrics at ", 1)[1].split("/metrics", 1)[0]
        # The endpoint is up before the scheduler starts: "not started" (503) until it has.
        wait_until("a healthy daemon", lambda: get(base + "/healthz") == (200, "ok\n"))

        def scraped() -> str | None:
            text = get(base + "/metrics")[1]
            ok = 'tickwork_runs_total{job="tick",outcome="ok"}' in text
            return text if ok and 'job="fail",outcome="failed"' in text else None

        text = wait_until("both jobs in /metrics", scraped, LIMIT)
        assert 'tickwork_next_run_timestamp_seconds{job="tick"}' in text
        assert 'tickwork_run_lateness_seconds_bucket{job="tick",le="0.1"}' in text
        assert "tickwork_store_errors_total 0.0" in text
        assert "jobs/" not in text  # labels are the names of the file, not stored ids
        run.signal(15)
        assert run.wait() == 0
    finally:
        run.kill()


def test_the_daemon_s_metrics_show_pauses_failure_streaks_and_waiting_runs(
    tmp_path: Path,
) -> None:

    jobs, state = tmp_path / "jobs.toml", tmp_path / "s.sqlite3"
    jobs.write_text(
        textwrap.dedent(
            """
            [[job]]
            name = "fail"
            every = "1h"
            first = "0s"
            command = ["false"]

            [[job]]
            name = "slow"
            every = "1h"
            first = "0s"
            overlap = "queue"
            command = ["sleep", "60"]

            [[job]]
            name = "off"
            every = "1h"
            enabled = false
            command = ["true"]
            """
        )
    )

    def tickwork(*args: str) -> None:  # its own process, forked warm (tests/forked.py)
        forked.tickwork(
            *args, "-f", str(jobs), "--state", str(state), timeout=60
        ).check_returncode()

    def gauge(text: str, name: str, job: str) -> float | None:
        head = f'{name}{{job="{job}"}} '
        line = next((x for x in text.splitlines() if x.startswith(head)), None)
        return None if line is None else float(line[len(head) :])

    run = Run(jobs, state, "--http", "127.0.0.1:0", "--shutdown-grace", "1s")
    try:
        line = run.wait_line("metrics at http://127.0.0.1:")
        base = line.split("metrics at ", 1)[1].split("/metrics", 1)[0]
        run.wait_line(" fail failed ")
        run.wait_line(" slow started")
        for _ in range(2):  # one more run of each: two wait for the one going
            tickwork("trigger", "slow")

        def scraped(want: dict[tuple[str, str], float]) -> str | None:
            text = get(base + "/metrics")[1]
            return text if all(gauge(text, *k) == v for k, v in want.items()) else None

        text = wait_until(
            "the gauges",
            lambda: scraped(
                {
                    ("tickwork_failure_streak", "fail"): 1.0,
                    ("tickwork_waiting_runs", "slow"): 2.0,
                    ("tickwork_paused", "off"): 1.0,
                    ("tickwork_paused", "fail"): 0.0,
                }
            ),
            LIMIT,
        )
        assert gauge(text, "tickwork_failure_streak", "slow") == 0.0
        assert gauge(text, "tickwork_waiting_runs", "fail") == 0.0
        assert gauge(text, "tickwork_next_run_timestamp_seconds", "off") is None  # held
        assert "# TYPE tickwork_paused gauge" in text
        # A second failure lengthens the streak; a pause shows at the next scrape.
        tickwork("trigger", "fail")
        tickwork("pause", "slow")
        wait_until(
            "a streak of 2 and slow paused",
            lambda: scraped(
                {("tickwork_failure_streak", "fail"): 2.0, ("tickwork_paused", "slow"): 1.0}
            ),
            LIMIT,
        )
    finally:
        run.stop()


def test_the_daemon_s_run_counts_equal_the_ledger_with_retried_commands(tmp_path: Path) -> None:
    # Issue 39 (B13): a command's failed attempts before a retry were in the ledger but
    # not in tickwork_runs_total, and each attempt must start and end for the gauge.
    import json

    from prometheus_client.parser import text_string_to_metric_families

    jobs, state = tmp_path / "jobs.toml", tmp_path / "s.sqlite3"
    jobs.write_text(
        textwrap.dedent(
            """
            [[job]]
            name = "flaky"
            every = "1h"
            first = "0s"
            working_dir = "."
            command = ["sh", "-c", "echo x >> tries; [ $(wc -l < tries) -gt 2 ]"]
            retries = 2
            retry_backoff = "10ms"

            [[job]]
            name = "bad"
            every = "1h"
            first = "0s"
            command = ["false"]
            retries = 1
            retry_backoff = "10ms"
            """
        )
    )

    def ledger() -> dict[tuple[str, str], float]:
        # Polled: forked warm (tests/forked.py), no Python start-up each time.
        done = forked.tickwork("history", "--json", "-f", str(jobs), "--state", str(state),
                               timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        counts: dict[tuple[str, str], float] = {}
        for item in json.loads(done.stdout):
            if item["kind"] == "slot":
                key = (item["job"], item["outcome"])
                counts[key] = counts.get(key, 0.0) + 1
        return counts

    def metrics(name: str) -> dict[tuple[str, ...], float]:
        return {
            tuple(s.labels.values()): s.value
            for family in text_string_to_metric_families(get(base + "/metrics")[1])
            for s in family.samples
            if s.name == name
        }

    run = Run(jobs, state, "--http", "127.0.0.1:0")
    try:
        line = run.wait_line("metrics at http://127.0.0.1:")
        base = line.split("metrics at ", 1)[1].split("/metrics", 1)[0]
        want = {("flaky", "failed"): 2.0, ("flaky", "ok"): 1.0, ("bad", "failed"): 2.0}
        wait_until("both runs in the ledger", lambda: ledger() == want, LIMIT)
        wait_until(
            f"tickwork_runs_total in /metrics equal to the ledger, {want}",
            lambda: metrics("tickwork_runs_total") == want,
            LIMIT,
        )
        assert metrics("tickwork_running") == {("flaky",): 0.0, ("bad",): 0.0}
    finally:
        run.stop()


def test_http_refresh_is_10_s_unless_told_and_a_whole_number_of_seconds() -> None:
    from tickwork.__main__ import build_parser
    from tickwork._cli.run import daemon_config

    parse = build_parser().parse_args
    assert daemon_config(parse(["run", "j.toml"])).http_refresh == 10
    assert daemon_config(parse(["run", "j.toml", "--http-refresh", "2"])).http_refresh == 2
    err = io.StringIO()
    with pytest.raises(SystemExit), contextlib.redirect_stderr(err):
        parse(["run", "j.toml", "--http-refresh", "0"])
    assert "argument --http-refresh: must be an integer >= 1, got 0" in err.getvalue()


def test_http_needs_a_valid_address(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "t"\nevery = "1s"\ncommand = ["true"]\n')
    err = io.StringIO()
    config = DaemonConfig(str(jobs), state=str(tmp_path / "s.db"), http="127.0.0.1:x")
    assert run_daemon(config, err=err) == 2
    assert "--http must be HOST:PORT, :PORT or PORT (port 0-65535), got '127.0.0.1:x'" in (
        err.getvalue()
    )
    err = io.StringIO()
    config = DaemonConfig(
        str(jobs), state=str(tmp_path / "s.db"), http="127.0.0.1:0", http_prefix="ops/"
    )
    assert run_daemon(config, err=err) == 2
    assert "--http-prefix must be a path such as /ops/tickwork" in err.getvalue()
    assert "got 'ops/'" in err.getvalue()
    assert not (tmp_path / "s.db").exists()  # refused before anything was opened


def test_a_base_install_serves_the_pages_and_only_metrics_asks_for_the_extra(
    tmp_path: Path,
) -> None:
    """Without the ``metrics`` extra (prometheus_client cannot be imported)."""
    import os

    blocked = tmp_path / "no-extra" / "prometheus_client"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('no prometheus_client here')\n")
    path = os.pathsep.join(p for p in (str(blocked.parent), os.environ.get("PYTHONPATH")) if p)
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "t"\nevery = "1h"\ncommand = ["true"]\n')
    run = Run(
        jobs, tmp_path / "s.db", "--http", "127.0.0.1:0", env=os.environ | {"PYTHONPATH": path}
    )
    try:
        line = run.wait_line("metrics at http://127.0.0.1:")
        assert "/metrics (needs prometheus_client: tickwork[metrics])" in line
        base = line.split("status page at ", 1)[1].split("/,", 1)[0]
        status, page = get(base + "/")
        assert status == 200 and '<td class="job">t' in page
        assert get(base + "/api/jobs")[0] == 200
        assert get(base + "/metrics") == (
            501,
            "/metrics needs prometheus_client: pip install 'tickwork[metrics]'\n",
        )
    finally:
        run.stop()


# -- safe by default (issue 42) ---------------------------------------------------------


def ask(url: str, headers: dict[str, str], method: str = "GET") -> tuple[int, str]:
    request = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_host_that_is_not_this_servers_is_refused(tmp_path: Path) -> None:
    """DNS rebinding: a page of attacker.example, resolved to 127.0.0.1, cannot read the API."""
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "t"\nevery = "1h"\ncommand = ["true"]\n')
    run = Run(jobs, tmp_path / "s.db", "--http", "127.0.0.1:0", "--http-host-name", "Jobs.Internal")
    try:
        line = run.wait_line("metrics at http://127.0.0.1:")
        base = line.split("metrics at ", 1)[1].split("/metrics", 1)[0]
        port = base.rsplit(":", 1)[1]
        status, text = ask(base + "/api/jobs", {"Host": f"attacker.example:{port}"})
        assert status == 400, text
        assert "the Host header 'attacker.example:" in text and "--http-host-name" in text
        assert ask(base + "/", {"Host": "attacker.example"})[0] == 400
        assert ask(base + "/metrics", {"Host": "127.0.0.1.attacker.example"})[0] == 400
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "jobs.internal:80", "[::1]"):
            status, text = ask(base + "/api/jobs", {"Host": host})
            assert status == 200 and '"jobs"' in text, (host, status, text)
    finally:
        run.stop()


def test_beyond_loopback_without_a_token_is_refused_unless_reads_are_public(
    tmp_path: Path,
) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "t"\nevery = "1h"\ncommand = ["true"]\n')
    err = io.StringIO()
    config = DaemonConfig(str(jobs), state=str(tmp_path / "s.db"), http="0.0.0.0:0", run_for=5)
    assert run_daemon(config, err=err) == 2
    assert (
        "--http 0.0.0.0:0 is reachable from other hosts and has no --http-token: give one"
        in err.getvalue()
    )
    assert "--http-public-reads" in err.getvalue()
    assert not (tmp_path / "s.db").exists()  # refused before anything was opened
    err = io.StringIO()
    config = DaemonConfig(
        str(jobs), state=str(tmp_path / "s.db"), http="0.0.0.0:0", http_tokens=("ana=s3cret",)
    )
    assert run_daemon(replace(config, run_for=0.5), err=err) == 0, err.getvalue()
    err = io.StringIO()
    config = DaemonConfig(
        str(jobs), state=str(tmp_path / "s.db"), http="0.0.0.0:0", http_public_reads=True,
        run_for=0.5,
    )  # fmt: skip
    assert run_daemon(config, err=err) == 0, err.getvalue()
    assert "anyone who can connect reads the job names" in err.getvalue()


def answer(base: str, method: str, path: str, headers: dict[str, str] | None = None) -> Any:
    """One request by http.client (HEAD and OPTIONS included): status, headers, body."""
    import http.client

    host, port = base.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request(method, path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


def test_head_options_and_the_pages_security_headers(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "t"\nevery = "1h"\ncommand = ["true"]\n')
    run = Run(jobs, tmp_path / "s.db", "--http", "127.0.0.1:0", "--http-token", "ana=s3cret")
    bearer = {"Authorization": "Bearer s3cret"}
    try:
        line = run.wait_line("metrics at http://127.0.0.1:")
        base = line.split("metrics at ", 1)[1].split("/metrics", 1)[0]
        wait_until("a healthy daemon", lambda: get(base + "/healthz") == (200, "ok\n"))
        status, headers, body = answer(base, "HEAD", "/healthz")
        assert (status, headers["Content-Length"], body) == (200, "3", b"")
        status, headers, body = answer(base, "HEAD", "/api/jobs", bearer)
        assert status == 200 and int(headers["Content-Length"]) > 20 and body == b""
        assert answer(base, "HEAD", "/jobs/t", bearer)[0] == 200
        for path, allow in [
            ("/api/jobs/t/pause", "POST, OPTIONS"),
            ("/jobs/t", "GET, HEAD, OPTIONS"),
            ("/login", "GET, HEAD, POST, OPTIONS"),
            ("/metrics", "GET, HEAD, OPTIONS"),
        ]:
            status, headers, body = answer(base, "OPTIONS", path)
            assert (status, headers["Allow"], body) == (204, allow, b""), path
        assert answer(base, "OPTIONS", "/nothing/here")[0] == 404
        status, headers, _ = answer(base, "PUT", "/api/jobs/t")
        assert status == 405 and headers["Allow"] == "GET, HEAD, OPTIONS"
        for path, who in [("/", bearer), ("/jobs/t", bearer), ("/login", {}), ("/", {})]:
            status, headers, _ = answer(base, "GET", path, who)
            csp = headers["Content-Security-Policy"]
            assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp, path
            # No script but the live refresh's, by its hash (no 'unsafe-inline' for scripts).
            assert f"script-src {LIVE_HASH};" in csp and csp.count("script-src") == 1
            assert headers["Referrer-Policy"] == "same-origin"
    finally:
        run.stop()


def test_a_connection_that_sends_half_a_request_is_closed() -> None:
    import socket
    import threading

    server = StatusServer(("127.0.0.1", 0), CollectorRegistry(), Fake(), idle_timeout=0.5)
    server.start()
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    before = threading.active_count()
    sockets = [socket.create_connection((host, int(port)), timeout=60) for _ in range(20)]
    try:
        for s in sockets:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and no end
        for s in sockets:
            assert s.recv(100) == b""  # closed by the server, not left hanging
        wait_until("the threads gone", lambda: threading.active_count() <= before)
        assert get(server.url + "/healthz") == (200, "ok\n")
    finally:
        for s in sockets:
            s.close()
        server.close()
