"""What Airflow learns about this provider (``apache_airflow_provider`` entry point).

Every Airflow component calls :func:`get_provider_info` at start-up, so it returns a
literal and imports nothing but the service's default port (:mod:`rcp_core.remote`
holds only constants): not Airflow, not the engine. ``package-name`` must equal the
distribution's name (Airflow refuses the provider otherwise); a test validates the
dict against Airflow's own ``provider_info.schema.json`` and imports every module it
names.

The connection's ``conn-fields`` are the one declaration of its extras: the form shows
them, and :func:`rcp_provider.hooks.endpoint.typed_extras` reads a connection's extras
by their ``schema`` there.
"""

from __future__ import annotations

from typing import Any

from rcp_core.remote import SERVICE_PORT

INTEGRATION = "rcp"


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-provider-rcp",
        "name": "rcp",
        "description": "Parallel, metadata-preserving copies of file trees: on a "
        "worker's storage, through `rcpd serve` daemons between hosts, and sharded "
        "over Airflow's workers.",
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://pypi.org/project/airflow-provider-rcp/",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "rcp_operators.copy",
                    "rcp_operators.shards",
                    "rcp_operators.remove",
                    "rcp_operators.compare",
                    "rcp_operators.link",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["rcp_operators.sensors"],
            }
        ],
        "hooks": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["rcp_provider.hooks.rcp"],
            }
        ],
        "triggers": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["rcp_provider.triggers.rcp"],
            }
        ],
        "filesystems": ["rcp_provider.fs.rcp"],
        "asset-uris": [
            {
                "schemes": ["rcp"],
                "handler": "rcp_provider.assets.rcp.sanitize_uri",
                "factory": "rcp_provider.assets.rcp.create_asset",
                "to_openlineage_converter": (
                    "rcp_provider.assets.rcp.convert_asset_to_openlineage"
                ),
            }
        ],
        "connection-types": [
            {
                "connection-type": "rcp",
                "hook-class-name": "rcp_provider.hooks.rcp.RcpHook",
                "hook-name": "rcp",
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "login"],
                    "relabeling": {
                        "host": "rcpd serve host (empty: the worker's own storage)",
                        "port": f"rcpd serve port (empty: {SERVICE_PORT})",
                        "password": "Service token",
                    },
                    "placeholders": {
                        "host": "storage-01.example.org",
                        "port": str(SERVICE_PORT),
                    },
                },
                "conn-fields": {
                    "fingerprint": {
                        "label": "Service certificate SHA-256",
                        # Shown as plain text under the field: no Markdown.
                        "description": "The fingerprint that rcpd serve printed when "
                        "it started (pinned: no other certificate is accepted).",
                        "schema": {"type": ["string", "null"]},
                    },
                    "no_encryption": {
                        "label": "No encryption (trusted networks only)",
                        "schema": {"type": ["boolean", "null"]},
                    },
                    "timeout": {
                        "label": "Seconds to wait for each answer of the service",
                        "schema": {"type": ["number", "null"], "minimum": 1},
                    },
                    "max_workers": {
                        "label": "Worker threads of copies on a worker",
                        "schema": {"type": ["integer", "null"], "minimum": 1},
                    },
                },
            }
        ],
    }
