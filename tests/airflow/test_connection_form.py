"""The ``delta`` connection form as Airflow's providers manager builds it, and what the hook reads from a
connection saved through it."""

from __future__ import annotations

import json

import pytest


def _widgets() -> dict:
    from airflow.providers_manager import ProvidersManager

    return {
        k: v for k, v in ProvidersManager().connection_form_widgets.items() if k.startswith("extra__delta__")
    }


def test_the_form_has_storage_options_aws_connection_and_an_engine_choice() -> None:
    from deltaguard.engines.base import ENGINES

    widgets = _widgets()
    assert widgets["extra__delta__storage_options"].field["schema"]["type"] == ["object", "null"]
    assert widgets["extra__delta__aws_conn_id"].field["schema"]["type"] == ["string", "null"]
    engine = widgets["extra__delta__engine"].field["schema"]
    # a choice of the engines the registry builds (and empty: the configured default)
    assert engine["enum"] == [None, *sorted(ENGINES)]
    assert not any(w.is_sensitive for w in widgets.values())


@pytest.mark.parametrize(
    "options",
    [{"AWS_REGION": "eu-central-1"}, json.dumps({"AWS_REGION": "eu-central-1"})],
    ids=["object", "text"],
)
def test_a_connection_saved_by_the_form_gives_its_storage_options_and_engine(monkeypatch, options) -> None:
    from deltaguard.hooks.delta import DeltaTableHook

    conn = {
        "conn_type": "delta",
        "host": "s3://lake/wh",
        "extra": {"storage_options": options, "engine": "spark"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps(conn))
    hook = DeltaTableHook("lake")
    assert hook.storage_options == {"AWS_REGION": "eu-central-1"}
    assert hook.engine_name == "spark" and hook.table_uri("sales") == "s3://lake/wh/sales"
