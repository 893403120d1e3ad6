"""The plugin's endpoints inside the real Airflow api-server app, with real users and tokens.

One app per module (building it imports most of Airflow); the lease store is a real SQLite file filled
through the real lease manager, and ``[deltaguard] lease_store_url`` is changed between tests (it is read
on every request).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deltaguard.leases.open import open_store
from deltaguard.leases.store import DecisionRow
from tests.ui.airflow_app import build_app, token
from tests.ui.scenario import CUSTOMERS, RUN, STALE, Scenario, build

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    placeholder = tmp_path_factory.mktemp("ui-store") / "leases.db"
    saved = dict(os.environ)  # the Airflow settings below are for this module only
    try:
        app = build_app(f"sqlite:///{placeholder}")
        with TestClient(app) as test_client:
            yield test_client
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def tokens(client: Any) -> dict[str, str]:
    return {user: token(client, user) for user in ("admin", "viewer")}


@pytest.fixture
def store_of(scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> Scenario:
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", scenario.url)
    return scenario


def bearer(tok: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tok}"}


READ_ROUTES = [
    "/deltaguard/api/tables",
    f"/deltaguard/api/table?uri={CUSTOMERS}",
    "/deltaguard/api/decisions",
    f"/deltaguard/api/decision?dag_id=daily_sales&run_id={RUN}&task_id=merge_b",
    "/deltaguard/api/waiting",
    "/deltaguard/docs",
    "/deltaguard/redoc",
    "/deltaguard/openapi.json",
]


def test_plugin_is_registered_once_through_its_entry_point(client: Any, tokens: dict[str, str]) -> None:
    """The app is built with Airflow's default (lazy) provider discovery: the entry point alone loads it."""
    plugins = client.get("/api/v2/plugins", headers=bearer(tokens["admin"])).json()["plugins"]
    mine = [p for p in plugins if p["name"] == "deltaguard"]
    assert len(mine) == 1
    assert mine[0]["fastapi_apps"][0]["url_prefix"] == "/deltaguard"
    assert "airflow-provider-deltaguard" in mine[0]["source"]
    # one name everywhere, rendered by Airflow's UI (react_apps), no iframe views left
    apps = {a["destination"]: a for a in mine[0]["react_apps"]}
    assert set(apps) == {"nav", "dag", "dag_run", "task_instance", "dashboard"}
    assert apps["dag"]["url_route"] == "delta-leases-plan"
    assert {a["name"] for a in apps.values()} == {"Delta leases"} and mine[0]["external_views"] == []
    assert apps["nav"]["category"] == "browse" and apps["task_instance"]["url_route"] == "delta-leases-task"
    bundle = client.get("/" + apps["nav"]["bundle_url"])
    assert bundle.status_code == 200 and bundle.headers["content-type"].startswith("text/javascript")
    # it uses Airflow's React and Chakra UI (theme, colour mode) instead of bringing its own
    assert "AirflowPlugin" in bundle.text and "ChakraUI" in bundle.text and "createRoot" not in bundle.text
    assert client.get("/deltaguard/static/..%2Fapp.py").status_code == 404
    errors = client.get("/api/v2/plugins/importErrors", headers=bearer(tokens["admin"])).json()
    assert not [e for e in errors["import_errors"] if "deltaguard" in str(e)], errors


@pytest.mark.parametrize("route", READ_ROUTES)
def test_anonymous_and_forged_requests_are_refused(client: Any, store_of: Scenario, route: str) -> None:
    assert client.get(route).status_code == 401
    # a token that fails validation is "not authenticated" (RFC 6750 invalid_token), not "forbidden"
    forged = client.get(route, headers=bearer("not-a-jwt"))
    assert forged.status_code == 401 and "invalid_token" in forged.headers["www-authenticate"]
    client.cookies.set("_token", "not-a-jwt")
    try:
        assert client.get(route).status_code == 401
    finally:
        client.cookies.clear()


def test_token_signed_with_another_secret_is_refused(client: Any, store_of: Scenario) -> None:
    import jwt

    foreign = jwt.encode({"sub": "admin", "role": "ADMIN", "exp": time.time() + 600}, "x" * 64, "HS512")
    assert client.get("/deltaguard/api/tables", headers=bearer(foreign)).status_code == 401


def test_browser_with_an_expired_session_is_sent_to_login(client: Any, store_of: Scenario) -> None:
    client.cookies.set("_token", "not-a-jwt")
    try:
        answer = client.get("/deltaguard/docs", headers={"accept": "text/html"}, follow_redirects=False)
    finally:
        client.cookies.clear()
    assert answer.status_code == 303 and "/auth/login" in answer.headers["location"]


def test_api_description_lists_the_routes_for_a_reader(client: Any, tokens: dict[str, str]) -> None:
    spec = client.get("/deltaguard/openapi.json", headers=bearer(tokens["viewer"])).json()
    assert "/api/tables" in spec["paths"] and "/api/leases/{lease_id}/release-stale" in spec["paths"]
    assert "/docs" not in spec["paths"]
    docs = client.get("/deltaguard/docs", headers=bearer(tokens["viewer"])).text
    assert "/deltaguard/openapi.json" in docs


def test_decision_api_refuses_a_negative_try_number(
    client: Any, tokens: dict[str, str], store_of: Scenario
) -> None:
    route = "/deltaguard/api/decision"
    url = f"{route}?dag_id=daily_sales&run_id={RUN}&task_id=merge_b&try_number=-1"
    assert client.get(url, headers=bearer(tokens["viewer"])).status_code == 422
    url = f"{route}?dag_id=daily_sales&run_id={RUN}&task_id=merge_b&try_number=1"
    assert client.get(url, headers=bearer(tokens["viewer"])).status_code == 200


def test_anonymous_browser_is_sent_to_login(client: Any, store_of: Scenario) -> None:
    answer = client.get("/deltaguard/docs", headers={"accept": "text/html"}, follow_redirects=False)
    assert answer.status_code == 303 and "/auth/login" in answer.headers["location"]
    # the JSON API answers 401, whatever the client accepts
    api = client.get("/deltaguard/api/tables", headers={"accept": "text/html"}, follow_redirects=False)
    assert api.status_code == 401


@pytest.mark.parametrize("route", READ_ROUTES)
def test_viewer_reads_with_bearer_or_ui_cookie(
    client: Any, tokens: dict[str, str], store_of: Scenario, route: str
) -> None:
    by_header = client.get(route, headers=bearer(tokens["viewer"]))
    assert by_header.status_code == 200, by_header.text
    client.cookies.set("_token", tokens["viewer"])
    try:
        assert client.get(route).status_code == 200
    finally:
        client.cookies.clear()


def test_api_shows_the_waiting_task_its_blocker_and_reason(
    client: Any, tokens: dict[str, str], store_of: Scenario
) -> None:
    api = client.get("/deltaguard/api/tables", headers=bearer(tokens["viewer"])).json()
    customers = next(t for t in api["tables"] if t["uri"] == CUSTOMERS)
    assert [lease["owner"]["task_id"] for lease in customers["leases"]] == ["merge_a"]
    reason = next(w for w in customers["waiting"] if w["owner"]["task_id"] == "merge_b")["reasons"][0]
    assert reason
    stale = next(t for t in api["tables"] if t["uri"] == STALE)
    assert [lease["stale"] for lease in stale["leases"]] == [True]  # expired, so release-stale may free it
    decision = client.get(
        f"/deltaguard/api/decision?dag_id=daily_sales&run_id={RUN}&task_id=merge_b",
        headers=bearer(tokens["viewer"]),
    ).json()
    assert decision["headline"] == f"waiting behind daily_sales.merge_a ({RUN})"


def test_bad_input_is_a_client_error(client: Any, tokens: dict[str, str], store_of: Scenario) -> None:
    h = bearer(tokens["viewer"])
    assert client.get("/deltaguard/api/table?uri=file:///nowhere", headers=h).status_code == 404
    assert client.get(f"/deltaguard/api/table?uri={CUSTOMERS}&engine=oracle", headers=h).status_code == 400
    assert client.get("/deltaguard/api/decisions?limit=0", headers=h).status_code == 422
    assert client.get("/deltaguard/api/decisions?limit=100000", headers=h).status_code == 422


def test_release_stale_lease_authorization(client: Any, tokens: dict[str, str], store_of: Scenario) -> None:
    url = f"/deltaguard/api/leases/{store_of.stale_lease}/release-stale"
    assert client.post(url, json={}).status_code == 401
    assert client.post(url, json={}, headers=bearer(tokens["viewer"])).status_code == 403
    # the permission is checked before the body's type: a viewer learns nothing from a form post
    assert client.post(url, data={"x": "1"}, headers=bearer(tokens["viewer"])).status_code == 403
    # a form post (what a cross-site page could send with the cookie) is refused
    form = client.post(url, data={"x": "1"}, headers=bearer(tokens["admin"]))
    assert form.status_code == 415
    live = client.post(
        "/deltaguard/api/leases/r-merge-a/release-stale", json={}, headers=bearer(tokens["admin"])
    )
    assert live.status_code == 409, live.text
    assert (
        client.post(
            "/deltaguard/api/leases/nope/release-stale", json={}, headers=bearer(tokens["admin"])
        ).status_code
        == 404
    )
    done = client.post(url, json={}, headers=bearer(tokens["admin"]))
    assert done.status_code == 200 and done.json() == {
        "released": store_of.stale_lease,
        "tables": [STALE],
        "by": "admin",
    }
    logged = client.get(
        f"/deltaguard/api/decisions?uri={STALE}&limit=1", headers=bearer(tokens["viewer"])
    ).json()
    assert logged["decisions"][0]["kind"] == "release" and logged["decisions"][0]["detail"]["by"] == "admin"
    assert client.post(url, json={}, headers=bearer(tokens["admin"])).status_code == 404


def test_empty_store(
    client: Any, tokens: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", f"sqlite:///{tmp_path / 'empty.db'}")
    h = bearer(tokens["viewer"])
    assert client.get("/deltaguard/api/tables", headers=h).json() == {
        "tables": [],
        "next_after": None,
        "limit": 50,
    }
    assert client.get("/deltaguard/api/decisions", headers=h).json()["decisions"] == []


def test_large_store_answers_are_bounded(
    client: Any, tokens: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10,000 decisions on one table by one task: every answer is one page, and pages continue."""
    scenario = build(tmp_path)
    store = open_store(scenario.url)
    owner_key = scenario.manager.leases(CUSTOMERS)[0].owner.key
    start = time.time() - 10_000
    with store.transaction([CUSTOMERS]) as txn:
        txn.log(
            [
                DecisionRow(start + i, "wait", f"bulk-{i}", CUSTOMERS, owner_key, '{"explain": "bulk"}')
                for i in range(10_000)
            ]
        )
    store.close()
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", scenario.url)
    h = bearer(tokens["viewer"])
    page = client.get("/deltaguard/api/decisions?limit=500", headers=h).json()
    assert len(page["decisions"]) == 500 and page["next_before"] is not None
    second = client.get(f"/deltaguard/api/decisions?limit=500&before={page['next_before']}", headers=h).json()
    assert len(second["decisions"]) == 500 and second["decisions"][0]["at"] < page["next_before"]
    detail = client.get(f"/deltaguard/api/table?uri={CUSTOMERS}", headers=h).json()
    assert len(detail["decisions"]) == 50 and len(detail["timeline"]["rows"]) <= 50
    decision = client.get(
        f"/deltaguard/api/decision?dag_id=daily_sales&run_id={RUN}&task_id=merge_a", headers=h
    ).json()
    assert sum(len(a["log"]) for a in decision["attempts"]) <= 500


def test_operator_extra_link_opens_the_task_instance_tab_inside_airflow(
    client: Any, tokens: dict[str, str], store_of: Scenario
) -> None:
    from deltaguard.operators.links import decision_url
    from deltaguard.plugins.ui import TASK_INSTANCE_ROUTE

    url = decision_url("http://airflow.example:8080/", "daily_sales", RUN, "merge_b")
    path = url.removeprefix("http://airflow.example:8080")
    assert path == f"/dags/daily_sales/runs/{RUN}/tasks/merge_b/plugin/{TASK_INSTANCE_ROUTE}"
    assert decision_url("", "d", "r", "t", 3).endswith("/tasks/t/mapped/3/plugin/delta-leases-task")
    page = client.get(path, headers=bearer(tokens["viewer"]))  # Airflow's own UI serves the route
    assert page.status_code == 200 and "<base href=" in page.text and "deltaguard" not in page.text
    answer = client.get(
        f"/deltaguard/api/decision?dag_id=daily_sales&run_id={RUN}&task_id=merge_b",
        headers=bearer(tokens["viewer"]),
    )
    assert answer.json()["headline"] == f"waiting behind daily_sales.merge_a ({RUN})"


def test_delta_connection_test_button(
    client: Any, tokens: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The UI's Test button: Airflow's ``POST /api/v2/connections/test`` with a ``delta`` connection."""
    import pyarrow as pa
    from deltalake import write_deltalake

    monkeypatch.setenv("AIRFLOW__CORE__TEST_CONNECTION", "Enabled")
    write_deltalake(str(tmp_path / "sales"), pa.table({"id": [1]}))
    body = {"connection_id": "delta_lake", "conn_type": "delta", "host": f"file://{tmp_path / 'sales'}"}
    answer = client.post("/api/v2/connections/test", json=body, headers=bearer(tokens["admin"])).json()
    assert answer["status"] is True and "Delta table at version 0" in answer["message"], answer
    body["host"] = f"file://{tmp_path / 'missing'}"
    answer = client.post("/api/v2/connections/test", json=body, headers=bearer(tokens["admin"])).json()
    assert answer["status"] is False and "does not exist" in answer["message"], answer


def test_unreachable_store_is_a_503_without_its_password(
    client: Any, tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "AIRFLOW__DELTAGUARD__LEASE_STORE_URL",
        "postgresql+psycopg://dg:hunter2-pw@127.0.0.1:9/leases?connect_timeout=2",
    )
    for route in ("/deltaguard/api/tables", "/deltaguard/api/decisions"):
        answer = client.get(route, headers=bearer(tokens["viewer"]))
        assert answer.status_code == 503, answer.text
        assert "unavailable" in answer.text and "hunter2-pw" not in answer.text


@pytest.mark.parametrize("spelling", ["{dir}/sales", "file://{dir}/sales/"])
def test_operator_extra_links_open_the_table_and_decision_pages(
    client: Any, tokens: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    """A real write on a real table, then the links its task shows, computed by the operator's own extra
    links under ``[api] base_url``: both open pages of the plugin (not a storage path) about that write,
    whichever way the task spelled its table."""
    import datetime as dt
    from types import SimpleNamespace

    import pyarrow as pa
    from deltalake import write_deltalake

    from deltaguard.operators.dml import DeltaDeleteOperator
    from deltaguard.operators.links import DeltaDecisionLink, DeltaTableLink

    write_deltalake(str(tmp_path / "sales"), pa.table({"id": [1, 2]}))
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", f"sqlite:///{tmp_path / 'leases.db'}")
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://airflow.example:8080/")
    op = DeltaDeleteOperator(task_id="purge", table=spelling.format(dir=tmp_path), predicate="id = 1")
    start = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    ti = SimpleNamespace(dag_id="nightly", task_id="purge", run_id="r1", try_number=1, map_index=-1)
    run = SimpleNamespace(run_id="r1", start_date=start, run_after=start, logical_date=start, clear_number=0)
    op.execute({"ti": ti, "dag_run": run})

    links = {link.name: link.get_link(op, ti_key=ti) for link in (DeltaTableLink(), DeltaDecisionLink())}
    assert set(links) == {"Delta leases: table", "Delta leases"}
    for url in links.values():  # pages of Airflow's own UI, where the plugin's React app renders
        assert url.startswith("http://airflow.example:8080/"), url
        assert "/deltaguard/" not in url and "/plugin/delta-leases" in url
        page = client.get(url.removeprefix("http://airflow.example:8080"), headers=bearer(tokens["viewer"]))
        assert page.status_code == 200 and "<base href=" in page.text, (url, page.status_code)
    from urllib.parse import parse_qs, urlsplit

    key = parse_qs(urlsplit(links["Delta leases: table"]).query)["table"][0]
    table = client.get("/deltaguard/api/table", params={"uri": key}, headers=bearer(tokens["viewer"]))
    assert "nightly.purge" in json.dumps(table.json()["decisions"])  # the write, whichever spelling
    assert links["Delta leases"].endswith("/dags/nightly/runs/r1/tasks/purge/plugin/delta-leases-task")
    decision = client.get(
        "/deltaguard/api/decision?dag_id=nightly&run_id=r1&task_id=purge", headers=bearer(tokens["viewer"])
    )
    assert decision.json()["headline"].startswith("granted at once")


@pytest.mark.parametrize("map_index", ["²", "\u0661", "1.5", "abc", "--1", "-5", "99999999999999999999"])
def test_a_map_index_that_is_not_an_integer_is_a_client_error(
    client: Any, tokens: dict[str, str], store_of: Scenario, map_index: str
) -> None:
    """Unicode digits ("²" passes ``str.isdigit`` but not ``int``) are refused with a message, not a 500."""
    from urllib.parse import quote

    query = f"dag_id=daily_sales&run_id={RUN}&task_id=merge_b&map_index={quote(map_index)}"
    answer = client.get(f"/deltaguard/api/decision?{query}", headers=bearer(tokens["viewer"]))
    assert 400 <= answer.status_code < 500, answer.text


#: every read route, with a NUL character in each text it takes
NUL_ROUTES = [
    "/deltaguard/api/table?uri=/data/t%00x",
    "/deltaguard/api/tables?after=a%00b",
    "/deltaguard/api/decisions?uri=/data/t%00x",
    f"/deltaguard/api/decision?dag_id=daily%00sales&run_id={RUN}&task_id=merge_b",
    f"/deltaguard/api/decision?dag_id=daily_sales&run_id={RUN}%00&task_id=merge_b",
    "/deltaguard/api/waiting?dag_id=daily_sales&run_id=r%00",
]


@pytest.fixture
def pg_store_of(pg_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Scenario]:
    """The UI scenario in a fresh PostgreSQL database, made the configured lease store."""
    import uuid

    import sqlalchemy as sa

    name = f"dg_ui_nul_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(pg_server, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    scenario = build(tmp_path, pg_server.rsplit("/", 1)[0] + f"/{name}")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", scenario.url)
    try:
        yield scenario
    finally:
        scenario.manager.store.close()


@pytest.mark.postgres
@pytest.mark.parametrize("route", NUL_ROUTES)
def test_a_nul_character_is_a_400_on_postgresql(
    client: Any, tokens: dict[str, str], pg_store_of: Scenario, route: str
) -> None:
    """PostgreSQL cannot take text holding NUL (its driver raises): the request is refused as bad input."""
    answer = client.get(route, headers=bearer(tokens["viewer"]))
    assert answer.status_code == 400 and "NUL" in answer.json()["detail"], answer.text


@pytest.mark.postgres
def test_a_nul_character_in_a_lease_id_is_a_400_on_postgresql(
    client: Any, tokens: dict[str, str], pg_store_of: Scenario
) -> None:
    answer = client.post(
        "/deltaguard/api/leases/x%00y/release-stale", json={}, headers=bearer(tokens["admin"])
    )
    assert answer.status_code == 400 and "NUL" in answer.json()["detail"], answer.text


def test_plan_view_answers_deltaguard_plans_own_report(
    client: Any,
    tokens: dict[str, str],
    store_of: Scenario,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The DAG tab's plan is the JSON of `deltaguard plan FILE --dag-id DAG --store STORE --no-read`, not a
    recomputation: the api-server reads no Delta log."""
    from deltaguard.cli import main
    from deltaguard.plugins import plans
    from tests.ui.airflow_app import REPO, register_dag

    dag_path = REPO / "dags_examples" / "deltaguard_daily_sales.py"
    register_dag(dag_path)  # Airflow's database names the DAG's file, as after the DAG processor parsed it
    monkeypatch.setattr(plans, "_cache", {})
    answer = client.get(
        "/deltaguard/api/plan?dag_id=deltaguard_daily_sales", headers=bearer(tokens["viewer"])
    )
    assert answer.status_code == 200, answer.text
    capsys.readouterr()
    code = main(
        [
            "plan",
            str(dag_path),
            "--dag-id",
            "deltaguard_daily_sales",
            "--store",
            store_of.url,
            "--no-read",
            "--format",
            "json",
        ]
    )
    command = json.loads(capsys.readouterr().out)
    assert code == 0 and answer.json() == command
    assert command["tables"] and command["makespan"]["deltaguard"]["makespan_s"] > 0


def test_plan_view_of_an_unknown_dag_is_a_404(
    client: Any, tokens: dict[str, str], store_of: Scenario
) -> None:
    answer = client.get("/deltaguard/api/plan?dag_id=no_such_dag", headers=bearer(tokens["admin"]))
    assert answer.status_code == 404 and "no_such_dag" in answer.json()["detail"]
