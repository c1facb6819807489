"""The provider as Airflow discovers it: entry point, schema, modules, the CLI."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.resources
import json
import subprocess
import sys

import jsonschema
import pytest

from rcp_provider.get_provider_info import get_provider_info
from support.airflow import airflow

DISTRIBUTION = "airflow-provider-rcp"


def test_importing_the_package_and_its_provider_info_imports_no_airflow() -> None:
    code = (
        "import sys, rcp_provider, rcp_core\n"
        "from rcp_provider.get_provider_info import get_provider_info\n"
        "get_provider_info()\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'airflow')\n"
        "print(loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_entry_point_names_get_provider_info() -> None:
    (entry,) = [
        e
        for e in importlib.metadata.entry_points(group="apache_airflow_provider")
        if e.dist is not None and e.dist.name == DISTRIBUTION
    ]
    assert entry.load() is get_provider_info


def test_the_info_is_valid_under_airflows_own_schema() -> None:
    schema_file = importlib.resources.files("airflow") / "provider_info.schema.json"
    schema = json.loads(schema_file.read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == DISTRIBUTION


def test_every_module_and_class_it_names_imports() -> None:
    info = get_provider_info()
    modules = [
        module
        for key in ("operators", "hooks", "triggers")
        for group in info[key]
        for module in group["python-modules"]
    ] + info["filesystems"]
    for module in modules:
        importlib.import_module(module)
    (conn_type,) = info["connection-types"]
    module, _, name = conn_type["hook-class-name"].rpartition(".")
    hook = getattr(importlib.import_module(module), name)
    assert hook.conn_type == conn_type["connection-type"] == "rcp"
    assert hook.default_conn_name == "rcp_default"


@pytest.mark.slow
def test_airflow_providers_get_shows_it() -> None:
    out = airflow("providers", "get", DISTRIBUTION, "--output", "json").stdout
    assert json.loads(out) == [{"Provider": DISTRIBUTION, "Version": "0.1.0"}]
    out = airflow("providers", "hooks", "--output", "json").stdout
    rows = [row for row in json.loads(out) if row["connection_type"] == "rcp"]
    assert rows == [
        {
            "connection_type": "rcp",
            "class": "rcp_provider.hooks.rcp.RcpHook",
            "conn_id_attribute_name": "rcp_conn_id",
            "package_name": DISTRIBUTION,
            "hook_name": "rcp",
        }
    ]
