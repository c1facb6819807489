"""A real Prometheus server (Debian's ``prometheus``) scraping a real ``rcpd serve
--http-listen`` over TLS with the service's token, as the docs configure it; a PromQL
query through Prometheus' HTTP API returns the bytes of a finished job."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from benchmarks.sshd import free_port
from support.services import with_http_port

PROMETHEUS = "/usr/bin/prometheus"
WAIT = 60.0

CONFIG = """
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: rcpd
    scheme: https
    tls_config:
      insecure_skip_verify: true
    authorization:
      type: Bearer
      credentials_file: {token}
    static_configs:
      - targets: ["{target}"]
"""


def query(port: int, promql: str) -> list[dict[str, object]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode(
        {"query": promql}
    )
    with urllib.request.urlopen(url, timeout=10) as answer:
        data = json.load(answer)
    assert data["status"] == "success", data
    result: list[dict[str, object]] = data["data"]["result"]
    return result


def test_prometheus_scrapes_the_service_and_finds_a_jobs_bytes(tmp_path: Path) -> None:
    if not Path(PROMETHEUS).exists():
        pytest.fail("make system installs prometheus", pytrace=False)
    rcpd, tree = with_http_port(tmp_path, 12, 4096)
    port = free_port()
    (tmp_path / "prometheus.yml").write_text(
        CONFIG.format(token=tmp_path / "token", target=rcpd.announce["http"])
    )
    prometheus = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with rcpd.client() as client:
            job = client.submit([str(tree)], str(tmp_path / "backup" / "tree"))
            job = client.wait(job["job"], 30)
        assert job["state"] == "succeeded"
        promql = f'rcpd_job_bytes{{job_id="{job["job"]}", state="succeeded"}}'
        deadline = time.monotonic() + WAIT
        found: list[dict[str, object]] = []
        while not found:
            assert time.monotonic() < deadline, _targets(port)
            time.sleep(1)
            try:
                found = query(port, promql)
            except OSError:
                continue  # Prometheus is still starting
        [sample] = found
        value = sample["value"]
        assert isinstance(value, list)
        assert float(value[1]) == 12 * 4096
        [up] = query(port, 'up{job="rcpd"}')
        assert isinstance(up["value"], list)
        assert up["value"][1] == "1"
    finally:
        prometheus.terminate()
        prometheus.wait(30)
        assert rcpd.stop() == 0, rcpd.stderr


def _targets(port: int) -> object:
    """What Prometheus says of its targets (the last scrape's error)."""
    url = f"http://127.0.0.1:{port}/api/v1/targets"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return [
            (t["health"], t["lastError"])
            for t in json.load(answer)["data"]["activeTargets"]
        ]
