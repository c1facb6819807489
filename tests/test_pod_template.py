"""The Kubernetes executor's pod template in docs/airflow/distributed.md is one
Airflow can use for sharded copies: a Pod whose task container is ``base``, and
every mount of it a volume of the pod backed by a claim (the shared storage)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

PAGE = Path(__file__).resolve().parents[1] / "docs" / "airflow" / "distributed.md"


def _template() -> dict[str, Any]:
    blocks = re.findall(r"```yaml\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)
    assert len(blocks) == 1, "the page has one pod template"
    template: dict[str, Any] = yaml.safe_load(blocks[0])
    return template


def test_the_pod_template_mounts_the_shared_storage_in_the_base_container() -> None:
    template = _template()
    assert template["apiVersion"] == "v1"
    assert template["kind"] == "Pod"
    spec = template["spec"]
    [container] = spec["containers"]
    assert container["name"] == "base"
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    mounts = container["volumeMounts"]
    assert mounts
    for mount in mounts:
        assert mount["name"] in volumes
        assert mount["mountPath"].startswith("/")
        assert volumes[mount["name"]]["persistentVolumeClaim"]["claimName"]
    assert spec["restartPolicy"] == "Never"
    assert "AIRFLOW__KUBERNETES_EXECUTOR__POD_TEMPLATE_FILE" in PAGE.read_text()
