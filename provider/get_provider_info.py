"""The ``apache_airflow_provider`` entry point: what this provider registers with Airflow.

Importing this module must stay cheap and must not read Airflow's configuration: Airflow's providers
manager imports it in every process, often while the configuration itself is being loaded.
"""

from __future__ import annotations

from typing import Any

from deltaguard import __version__
from deltaguard.config import provider_config_description

_OPERATOR_MODULES = [
    "deltaguard.operators.base",
    "deltaguard.operators.dml",
    "deltaguard.operators.leased",
    "deltaguard.operators.maintenance",
    "deltaguard.operators.sql",
]
#: the engines a ``delta`` connection may name (the form's choice; ``deltaguard.engines.base`` also
#: accepts aliases such as ``deltars`` written into the extras by hand)
ENGINE_CHOICES = ("delta-rs", "spark")
_SENSOR_MODULES = ["deltaguard.sensors.table_version", "deltaguard.sensors.admission"]


#: the ``delta`` connection form, as :meth:`DeltaTableHook.get_ui_field_behaviour
#: <deltaguard.hooks.delta.DeltaTableHook.get_ui_field_behaviour>` returns it (defined once, here)
DELTA_UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden_fields": ["schema", "port", "login", "password"],
    "relabeling": {"host": "Base URI"},
    "placeholders": {
        "host": "s3://bucket/warehouse or file:///data/delta",
        "extra": '{"storage_options": {"AWS_REGION": "eu-central-1"}, "aws_conn_id": "aws_default"}',
    },
}


def get_provider_info() -> dict[str, Any]:
    """Describe the provider to Airflow's providers manager."""
    return {
        "package-name": "airflow-provider-deltaguard",
        "name": "deltaguard",
        "description": "Conflict-aware orchestration of Delta Lake writes: admits concurrent writes only "
        "when Delta's conflict rules say they cannot raise a concurrent-modification exception.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Delta Lake (deltaguard)",
                "external-doc-url": "https://docs.delta.io/latest/concurrency-control.html",
                "tags": ["software"],
            }
        ],
        "operators": [{"integration-name": "Delta Lake (deltaguard)", "python-modules": _OPERATOR_MODULES}],
        "sensors": [{"integration-name": "Delta Lake (deltaguard)", "python-modules": _SENSOR_MODULES}],
        "hooks": [
            {
                "integration-name": "Delta Lake (deltaguard)",
                "python-modules": ["deltaguard.hooks.delta", "deltaguard.hooks.lease"],
            }
        ],
        "triggers": [
            {
                "integration-name": "Delta Lake (deltaguard)",
                "python-modules": [
                    "deltaguard.triggers.lease",
                    "deltaguard.triggers.leased",
                    "deltaguard.triggers.table_version",
                ],
            }
        ],
        # `@task.delta_write`: a TaskFlow function under a deltaguard lease
        "task-decorators": [
            {"name": "delta_write", "class-name": "deltaguard.decorators.delta_write.delta_write_task"}
        ],
        "extra-links": [
            "deltaguard.operators.links.DeltaTableLink",
            "deltaguard.operators.links.DeltaDecisionLink",
        ],
        "connection-types": [
            {
                "hook-class-name": "deltaguard.hooks.delta.DeltaTableHook",
                "hook-name": "Delta Lake tables",
                "connection-type": "delta",
                "ui-field-behaviour": {k.replace("_", "-"): v for k, v in DELTA_UI_FIELD_BEHAVIOUR.items()},
                "conn-fields": {
                    "storage_options": {
                        "label": "Storage options",
                        "description": "deltalake storage options as a JSON object, e.g. "
                        '{"AWS_REGION": "eu-central-1"}; they win over those from the AWS connection',
                        "schema": {"type": ["object", "null"]},
                    },
                    "aws_conn_id": {
                        "label": "AWS connection",
                        "description": "an aws connection whose credentials, region and endpoint become "
                        "storage options (needs the amazon provider: the [aws] extra)",
                        "schema": {"type": ["string", "null"]},
                    },
                    "engine": {
                        "label": "Engine",
                        "description": "delta-rs or spark; empty uses [deltaguard] default_engine",
                        # a choice, not free text: a typo would only fail when a task runs
                        "schema": {"type": ["string", "null"], "enum": [None, *ENGINE_CHOICES]},
                    },
                    "spark_conn_id": {
                        "label": "Spark connection",
                        "description": "spark connection for engine=spark (master, spark-conf); empty uses "
                        "[deltaguard] spark_conn_id",
                        "schema": {"type": ["string", "null"]},
                    },
                    "spark_connect_conn_id": {
                        "label": "Spark Connect connection",
                        "description": "spark_connect connection for engine=spark over Spark Connect; empty "
                        "uses [deltaguard] spark_connect_conn_id",
                        "schema": {"type": ["string", "null"]},
                    },
                },
            }
        ],
        # No "plugins" entry: the UI plugin is the `airflow.plugins` entry point (setup.cfg), which Airflow
        # loads by default. Listing it here too would, with `[core] lazy_discover_providers = False`,
        # register it twice and make Airflow report "Plugin 'deltaguard' already registered" as a plugin
        # import error (airflow/plugins_manager.py, _get_plugins).
        "config": provider_config_description(),
    }
