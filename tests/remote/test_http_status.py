"""The HTTP port of a service (``--http-listen``): who may read it, what its
metrics and status page say of real jobs, and that the page escapes what it shows.
(A real Prometheus scraping it: ``test_prometheus.py``; the page in a browser:
``tests/operators/test_status_page.py``.)"""

from __future__ import annotations

import base64
import json
import re
import socket
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from rcp_core import CopySettings
from rcp_core.remote import tls
from rcp_core.remote.service import Service, ServiceConfig
from rcp_core.settings import ExistingPolicy
from support.services import TOKEN, Served, start

NO_PIN = ssl.create_default_context()
NO_PIN.check_hostname = False
NO_PIN.verify_mode = ssl.CERT_NONE  # the test checks the port's answers, not its chain


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    yield from start(tmp_path, http=("127.0.0.1", 0))


def get(served: Served, path: str, authorization: str | None) -> tuple[int, str]:
    assert served.service.http is not None
    host, port = served.service.http.address
    request = urllib.request.Request(f"https://{host}:{port}{path}")
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=10, context=NO_PIN) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""


BEARER = f"Bearer {TOKEN}"


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (None, 401),
        ("Bearer not-the-token", 401),
        (f"Basic {base64.b64encode(b'x:wrong').decode()}", 401),
        ("Basic !!!", 401),
        (BEARER, 200),
        (f"Basic {base64.b64encode(f'anyone:{TOKEN}'.encode()).decode()}", 200),
    ],
)
def test_only_the_services_token_reads_the_port(
    served: Served, authorization: str | None, status: int
) -> None:
    for path in ("/", "/metrics", "/jobs"):
        assert get(served, path, authorization)[0] == status


def test_other_paths_are_not_found_and_plain_http_is_refused(served: Served) -> None:
    assert get(served, "/etc/passwd", BEARER)[0] == 404
    assert served.service.http is not None
    host, port = served.service.http.address
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10)


def test_metrics_and_page_say_what_jobs_did(served: Served) -> None:
    tree = served.data / "tree"
    tree.mkdir()
    for i in range(20):
        (tree / f"f{i}").write_bytes(b"x" * 1000)
    (served.data / "<i>odd").mkdir()
    (served.backup / "<i>odd").mkdir()  # there already: the job fails
    with served.client() as client:
        settings = CopySettings(existing=ExistingPolicy.OVERWRITE)
        job = client.submit([str(tree)], str(served.backup / "tree"), settings)
        job = client.wait(job["job"], 30)
        assert job["state"] == "succeeded"
        bad = client.submit(
            [str(served.data / "<i>odd")], str(served.backup / "<i>odd")
        )
        bad = client.wait(bad["job"], 30)
        assert bad["state"] == "failed"

    status, text = get(served, "/metrics", BEARER)
    assert status == 200
    metrics = dict(re.findall(r"^(rcpd_[^ ]+) (\S+)$", text, re.M))
    job_labels = f'job_id="{job["job"]}",kind="copy",state="succeeded"'
    assert float(metrics[f"rcpd_job_bytes{{{job_labels}}}"]) == 20_000
    assert float(metrics[f"rcpd_job_files{{{job_labels}}}"]) == 20
    assert float(metrics['rcpd_jobs{state="succeeded"}']) == 1
    assert float(metrics['rcpd_jobs{state="failed"}']) == 1
    assert float(metrics['rcpd_jobs_ended_total{state="failed"}']) == 1
    assert float(metrics["rcpd_copied_bytes_total"]) == 20_000
    assert float(metrics["rcpd_copied_files_total"]) == 20
    assert float(metrics["rcpd_connections"]) == 0

    status, page = get(served, "/", BEARER)
    assert status == 200
    assert '<meta http-equiv="refresh" content="2">' in page
    assert "copied 20 files" in page
    assert "&lt;i&gt;odd" in page
    assert "<i>odd" not in page
    assert "<script" not in page

    status, body = get(served, "/jobs", BEARER)
    assert {view["job"] for view in json.loads(body)["jobs"]} == {
        job["job"],
        bad["job"],
    }


def test_a_service_closed_before_it_served_closes_its_port(tmp_path: Path) -> None:
    """Before: closing waited for an HTTP loop that had never started."""
    (tmp_path / "root").mkdir()
    config = ServiceConfig(
        roots=[str(tmp_path / "root")],
        identity=tls.Identity.ephemeral("t"),
        token=TOKEN,
        http=("127.0.0.1", 0),
    )
    service = Service(config, socket.create_server(("127.0.0.1", 0)))
    closing = threading.Thread(target=service.close, args=(10.0,), daemon=True)
    closing.start()
    closing.join(10)
    assert not closing.is_alive()
