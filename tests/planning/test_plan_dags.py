"""``deltaguard plan`` on real DAG files: the example DAGs, the benchmark's DAGs, a mapped DAG, tables
that cannot be read, a chart, and ``--check`` against a baseline."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from deltaguard.cli import main
from deltaguard.planning.leased_run import DEFAULT_HANDOFF_S, DEFAULT_SLOT_TIMES

#: a write's time in its worker slot around its write (start-up before the question, end after the commit)
AROUND = DEFAULT_SLOT_TIMES.start_s + DEFAULT_SLOT_TIMES.end_s

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "dags_examples"
EXAMPLE_FILES = sorted(p.name for p in EXAMPLES.glob("*.py"))


def plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    """Run ``deltaguard plan`` in this process; its exit code, its JSON (or text) and its stderr."""
    capsys.readouterr()  # what came before (a DagBag of the test's own logs to standard output)
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    try:
        return code, json.loads(out), err
    except ValueError:
        return code, out, err


def as_list(document: Any) -> list[dict[str, Any]]:
    return document if isinstance(document, list) else [document]


def parsed_writes(path: Path) -> dict[str, set[str]]:
    """The deltaguard write tasks of each DAG in ``path``, found without the planner (for comparison)."""
    from airflow.dag_processing.dagbag import DagBag

    from deltaguard.operators.base import DeltaWriteOperator
    from deltaguard.operators.leased_work import DeltaLeaseMixin

    found: dict[str, set[str]] = {}
    for dag_id, dag in DagBag(dag_folder=str(path)).dags.items():
        found[dag_id] = set()
        for task in dag.tasks:
            cls = (
                getattr(task, "operator_class", None)
                if type(task).__name__.endswith("MappedOperator")
                else type(task)
            )
            if isinstance(cls, type) and issubclass(cls, (DeltaWriteOperator, DeltaLeaseMixin)):
                found[dag_id].add(task.task_id)
    return found


@pytest.fixture
def example_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "example_data"
    monkeypatch.setenv("DELTAGUARD_EXAMPLE_DATA_DIR", str(data))
    monkeypatch.delenv("DELTAGUARD_EXAMPLE_TABLE_ROOT", raising=False)
    return data


def example_pipeline() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plan_example_pipeline", EXAMPLES / "example_pipeline.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_every_example_dag_is_planned(
    name: str, example_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = EXAMPLES / name
    expected = parsed_writes(path)
    code, document, err = plan(capsys, str(path), "--format", "json", "--no-store")
    if not expected:  # the pipeline's shared helpers: no DAG in the file
        assert code == 2 and "no DAG" in err
        return
    assert code == 0, err
    plans = {p["dag_id"]: p for p in as_list(document)}
    assert set(plans) == set(expected)
    for dag_id, writes in expected.items():
        found = plans[dag_id]
        assert {t["task_id"] for t in found["tasks"] if t["writes"]} == writes
        for table in found["tables"]:
            n = len(table["writes"])
            assert len(table["side_by_side"]) + len(table["serializing"]) == n * (n - 1) // 2
            assert all(pair["rule"] and pair["why"] for pair in table["serializing"])
        spans = {policy: found["makespan"][policy]["makespan_s"] for policy in found["makespan"]}
        # deltaguard pays a hand-off for each write granted out of the lease queue; pools' is not modelled
        handoffs = DEFAULT_HANDOFF_S * len(found["tasks"])
        assert spans["all_at_once"] <= spans["deltaguard"] <= spans["one_slot_pools"] + handoffs
        assert found["lower_bound_s"] <= spans["deltaguard"]


def test_daily_sales_read_from_its_tables(example_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example_pipeline().create_tables("deltaguard", "2026-01-15")
    code, found, err = plan(
        capsys, str(EXAMPLES / "deltaguard_daily_sales.py"), "--format", "json", "--no-store"
    )
    assert code == 0, err
    tables = {t["table"].rsplit("/", 1)[-1]: t for t in found["tables"]}
    sales = tables["sales_fact"]
    assert sales["config_source"] == "table" and sales["config"]["partition_columns"] == ["date", "country"]
    merges = [f"merge_sales_{c}" for c in ("de", "fr", "it", "es")]
    side = {frozenset(p) for p in sales["side_by_side"]}
    # the four countries' MERGEs keep to their partitions: each pair may run side by side
    assert all(frozenset((a, b)) in side for i, a in enumerate(merges) for b in merges[i + 1 :])
    customers = tables["customers"]
    metadata = [p for p in customers["serializing"] if "add_loyalty_column" in (p["a"], p["b"])]
    assert len(metadata) == 3
    assert all(
        p["rule"] == "common.metadata_change" and "MetadataChangedException" in p["exceptions"]
        for p in metadata
    )
    spans = {policy: found["makespan"][policy]["makespan_s"] for policy in found["makespan"]}
    # one-slot pools run the four MERGEs (and then the OPTIMIZE) one by one; deltaguard runs them together,
    # and the customers table's chain of four hands its lease on three times
    # (each write's task also holds its slot before its lease question and after its commit)
    assert spans["one_slot_pools"] == pytest.approx(300 + 5 * AROUND) and spans[
        "deltaguard"
    ] == pytest.approx(240 + 3 * DEFAULT_HANDOFF_S + AROUND)
    path = [step["task"] for step in found["makespan"]["deltaguard"]["critical_path"]]
    assert len(path) == 4 and path[-1] == "add_loyalty_column"  # the customers table's chain of four
    assert any("60 s each" in a for a in found["assumptions"])


def test_unreachable_tables_are_assumed_and_said_so(
    example_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text, err = plan(capsys, str(EXAMPLES / "deltaguard_daily_sales.py"), "--no-store")
    assert code == 0, err
    assert "configuration: assumed (unpartitioned; no Delta table there yet" in text
    assert "Assumed:" in text and "the strictest reading of a plain table" in text
    # unpartitioned, the MERGEs serialize, and a checked change that would let them overlap is offered
    assert "merge_sales_de <-> merge_sales_fr" in text
    assert "would run together if: partition the table by country" in text


def test_a_declared_table_document_stands_in_for_a_table(
    example_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uris = example_pipeline().table_uris("deltaguard")
    document = tmp_path / "tables.json"
    document.write_text(json.dumps({uris["sales_fact"]: {"partition_columns": ["date", "country"]}}))
    code, found, err = plan(
        capsys,
        str(EXAMPLES / "deltaguard_daily_sales.py"),
        "--format",
        "json",
        "--no-store",
        "--tables",
        str(document),
    )
    assert code == 0, err
    sales = next(t for t in found["tables"] if t["table"] == uris["sales_fact"])
    assert sales["config_source"] == "document"
    assert [
        p for p in sales["serializing"] if p["a"].startswith("merge") and p["b"].startswith("merge")
    ] == []


CREATED_DAG = """
from datetime import datetime
import pyarrow as pa
from airflow.sdk import DAG
from deltaguard.operators.dml import DeltaInsertOperator, DeltaMergeOperator

def rows():
    return pa.table({{"id": [1], "country": ["DE"]}})

with DAG("created_here", schedule=None, start_date=datetime(2026, 1, 1)):
    create = DeltaInsertOperator(task_id="create", table="{table}", source=rows, partition_by=["country"])
    merges = [
        DeltaMergeOperator(
            task_id=f"merge_{{c.lower()}}", table="{table}", source=rows, source_reads_target=False,
            condition="t.id = s.id", target_partition_values={{"country": c}},
        )
        for c in ("DE", "FR")
    ]
    {edges}
"""


@pytest.mark.parametrize(
    ("edges", "source"),
    [("create >> merges", "created"), ("create >> merges[0]", "assumed")],
    ids=["creates-before-every-write", "one-write-may-run-first"],
)
def test_a_table_not_there_yet_is_planned_as_the_dag_creates_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edges: str, source: str
) -> None:
    table = str(tmp_path / "lake" / "sales eu")  # a space, as real names have
    dag_file = tmp_path / "created.py"
    dag_file.write_text(CREATED_DAG.format(table=table, edges=edges))
    code, found, err = plan(capsys, str(dag_file), "--format", "json", "--no-store")
    assert code == 0, err
    (only,) = found["tables"]
    assert only["config_source"] == source
    merges = frozenset(("merge_de", "merge_fr"))
    side = {frozenset(p) for p in only["side_by_side"]}
    if source == "created":
        # partitioned by country as the create makes it: the MERGEs into two countries overlap
        assert merges in side
        assert any(
            "as create creates it" in a and "partitioned by country" in a for a in found["assumptions"]
        )
    else:
        # merge_fr may run before the create: the table's layout is not known, a plain table is assumed
        assert merges not in side
        assert any("the strictest reading of a plain table" in a for a in found["assumptions"])


MAPPED_DAG = """
from datetime import datetime
from airflow.sdk import DAG, task
from deltaguard.operators.dml import DeltaDeleteOperator

with DAG("mapped_writes", schedule=None, start_date=datetime(2026, 1, 1)):
    @task
    def partitions():
        return ["a", "b"]

    purge = DeltaDeleteOperator.partial(task_id="purge", table="{table}").expand(
        predicate=["p = 'a'", "p = 'b'", "p = 'a'"]
    )

    @task.delta_write(tables="{table}", operation="INSERT")
    def load(part):
        return part

    purge >> load.expand(part=partitions())
"""


def partitioned_table(path: Path) -> str:
    write_deltalake(str(path), pa.table({"p": ["a", "b"], "v": [1, 2]}), partition_by=["p"])
    return str(path)


def test_mapped_tasks_are_planned_per_instance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = partitioned_table(tmp_path / "t")
    dag_file = tmp_path / "mapped.py"
    dag_file.write_text(MAPPED_DAG.format(table=table))
    code, found, err = plan(
        capsys, str(dag_file), "--format", "json", "--no-store", "--mapped-instances", "3"
    )
    assert code == 0, err
    tasks = {t["task"]: t for t in found["tasks"]}
    assert {"purge[0]", "purge[1]", "purge[2]", "load[0]", "load[1]", "load[2]"} <= set(tasks)
    assert tasks["purge[1]"]["writes"][0]["operation"] == "DELETE (p = 'b')"
    assert (
        tasks["load[0]"]["writes"][0]["operation"] is None
        and "mapped over" in tasks["load[0]"]["writes"][0]["unknown"]
    )
    assert set(tasks["load[0]"]["upstream"]) == {"partitions", "purge[0]", "purge[1]", "purge[2]"}
    (only,) = found["tables"]
    side = {frozenset(p) for p in only["side_by_side"]}
    serial = {frozenset((p["a"], p["b"])) for p in only["serializing"]}
    assert frozenset(("purge[0]", "purge[1]")) in side  # different partitions
    assert frozenset(("purge[0]", "purge[2]")) in serial  # the same one
    assert frozenset(("load[0]", "load[1]")) in serial  # not known before the run: judged as conflicting
    assert any("3 instances assumed" in a for a in found["assumptions"])


CHECK_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from deltaguard.operators.dml import DeltaDeleteOperator

with DAG("guarded", schedule=None, start_date=datetime(2026, 1, 1)):
    DeltaDeleteOperator(task_id="purge_a", table="{table}", predicate="p = 'a'", expected_duration={a_s})
    DeltaDeleteOperator(task_id="purge_b", table="{table}", predicate="p = '{b}'", expected_duration=30)
"""


def test_check_catches_a_new_serializing_pair_and_a_longer_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = partitioned_table(tmp_path / "t")
    dag_file = tmp_path / "guarded.py"
    dag_file.write_text(CHECK_DAG.format(table=table, b="b", a_s=30))
    code, baseline, err = plan(capsys, str(dag_file), "--format", "json", "--no-store")
    assert code == 0 and baseline["makespan"]["deltaguard"]["makespan_s"] == pytest.approx(30 + AROUND)
    saved = tmp_path / "baseline.json"
    saved.write_text(json.dumps(baseline))
    assert plan(capsys, str(dag_file), "--no-store", "--check", str(saved))[0] == 0
    # the second DELETE now purges the first one's partition: a new serializing pair
    dag_file.write_text(CHECK_DAG.format(table=table, b="a", a_s=30))
    code, _, err = plan(capsys, str(dag_file), "--no-store", "--check", str(saved))
    assert code == 1 and "new serializing pair" in err and "purge_a <-> purge_b" in err
    # longer, within the tolerance (5 %), then past it
    dag_file.write_text(CHECK_DAG.format(table=table, b="b", a_s=31))
    assert plan(capsys, str(dag_file), "--no-store", "--check", str(saved))[0] == 0
    dag_file.write_text(CHECK_DAG.format(table=table, b="b", a_s=45))
    code, _, err = plan(capsys, str(dag_file), "--no-store", "--check", str(saved))
    longer = f"makespan {round(45 + AROUND, 3):g} s is longer than the baseline's {round(30 + AROUND, 3):g} s"
    assert code == 1 and longer in err


CAST_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from deltaguard.operators.dml import DeltaDeleteOperator

with DAG("casts", schedule=None, start_date=datetime(2026, 1, 1)):
    DeltaDeleteOperator(task_id="purge_cast", table="{table}", predicate="k = 1.5")
    DeltaDeleteOperator(task_id="purge_one", table="{table}", predicate="k = 1")
"""


@pytest.fixture
def fraction_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hand reading's check of a fraction on an integer partition taken out (ADR 0003 fact 13), so that
    ``k = 1.5`` and ``k = 1`` are kept apart by it and only delta-rs' evaluator can say they are not."""
    from deltaguard.core.rules import deltars

    monkeypatch.setattr(deltars, "fractional_columns", lambda p: frozenset())


@pytest.mark.usefixtures("fraction_unread")
def test_a_table_the_plan_reads_is_judged_with_the_engines_evaluator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On an INT partition delta-rs' DELETE of ``k = 1.5`` rewrites ``k = 1``: with the hand reading's own
    check of that taken out, the plan (which reads the table through the engines' door) must still say so."""
    table = str(tmp_path / "ints")
    write_deltalake(table, pa.table({"k": pa.array([1, 2], pa.int32()), "v": [1, 2]}), partition_by=["k"])
    dag_file = tmp_path / "casts.py"
    dag_file.write_text(CAST_DAG.format(table=table))
    code, found, err = plan(capsys, str(dag_file), "--format", "json", "--no-store")
    assert code == 0, err
    (only,) = found["tables"]
    assert only["config_source"] == "table"
    (pair,) = only["serializing"]
    assert {pair["a"], pair["b"]} == {"purge_cast", "purge_one"}
    assert pair["rule"] == "deltars.engine_unconfirmed", pair


@pytest.mark.usefixtures("fraction_unread")
def test_a_declared_table_document_is_judged_with_the_engines_evaluator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table not there yet, declared with its partition types: delta-rs' evaluator judges the delta-rs
    writes on it as it judges a table read from its log."""
    table = str(tmp_path / "not_yet")
    dag_file = tmp_path / "casts.py"
    dag_file.write_text(CAST_DAG.format(table=table))
    document = tmp_path / "tables.json"
    document.write_text(json.dumps({table: {"partition_columns": ["k"], "column_types": {"k": "integer"}}}))
    code, found, err = plan(
        capsys, str(dag_file), "--format", "json", "--no-store", "--tables", str(document)
    )
    assert code == 0, err
    (only,) = found["tables"]
    assert only["config_source"] == "document"
    (pair,) = only["serializing"]
    assert pair["rule"] == "deltars.engine_unconfirmed", pair


def test_the_chart_is_written_as_svg_or_png(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    table = partitioned_table(tmp_path / "t")
    dag_file = tmp_path / "guarded.py"
    dag_file.write_text(CHECK_DAG.format(table=table, b="a", a_s=30))
    svg = tmp_path / "plan.svg"
    assert plan(capsys, str(dag_file), "--no-store", "--out", str(svg))[0] == 0
    text = svg.read_text()
    assert (
        text.startswith("<svg")
        and "purge_a" in text
        and f"deltaguard: {round(60 + DEFAULT_HANDOFF_S + AROUND, 3):g} s" in text
    )
    png = tmp_path / "plan.png"
    pytest.importorskip("matplotlib")
    assert plan(capsys, str(dag_file), "--no-store", "--out", str(png))[0] == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the charts extra were not installed
    code, _, err = plan(capsys, str(dag_file), "--no-store", "--out", str(tmp_path / "again.png"))
    assert code == 2 and "needs matplotlib" in err


def test_the_benchmark_dag_is_planned_with_the_models_conflicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.bench_dags import STRATEGIES, dag_id_for, estimated_duration
    from benchmarks.workload_tables import BENCH_DIR_ENV, create_tables, write_plan
    from deltaguard.pools.priority import engine_profile
    from lab.simulation.workload import generate, model_conflicts

    workload = generate(9, tables=4, writes=20)
    uris = create_tables(workload, tmp_path / "data")
    for strategy in STRATEGIES:
        write_plan(tmp_path / f"{dag_id_for(strategy)}.json", workload, uris, tmp_path / "a.jsonl")
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    dags = tmp_path / "dags"
    dags.mkdir()
    for strategy in STRATEGIES:
        (dags / f"{strategy}.py").write_text(
            # (Airflow's safe mode parses only files that mention "airflow" and "dag")
            f"# an airflow DAG\nfrom benchmarks.bench_dags import benchmark_dag\ndag = benchmark_dag({strategy!r})\n"
        )
    code, document, err = plan(capsys, str(dags), "--format", "json", "--no-store")
    assert code == 0, err
    plans = {p["dag_id"]: p for p in as_list(document)}
    assert plans[dag_id_for("one_slot_pools")]["tables"] == []  # plain Python tasks: no deltaguard write
    found = plans[dag_id_for("deltaguard")]
    writes = {w.id: w for w in workload.writes}
    tasks = {t["task"]: t for t in found["tasks"]}
    assert set(tasks) == set(writes)
    for write in workload.writes:
        assert tasks[write.id]["duration_s"] == estimated_duration(workload.seed, write)
        assert tasks[write.id]["duration_source"] == "declared"
    conflicts = model_conflicts(workload, engine_profile("delta-rs"))
    planned = {frozenset((p["a"], p["b"])) for t in found["tables"] for p in t["serializing"]}
    expected = {
        frozenset((a.id, b.id))
        for i, a in enumerate(workload.writes)
        for b in workload.writes[i + 1 :]
        if a.table == b.table and conflicts(a, b)
    }
    assert planned == expected
    assert all(t["config_source"] == "table" for t in found["tables"])


def test_recorded_durations_and_configurations_from_the_lease_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from deltaguard.core.admission import LeaseRequest, Owner, TableClaim
    from deltaguard.core.operations import Operation, OperationKind
    from deltaguard.core.table_config import TableConfig
    from deltaguard.leases.manager import LeaseManager
    from deltaguard.leases.open import open_store
    from deltaguard.pools.priority import engine_profile
    from deltaguard.writes.table_uri import table_key

    table = partitioned_table(tmp_path / "t")
    dag_file = tmp_path / "guarded.py"
    dag_file.write_text(CHECK_DAG.format(table=table, b="b", a_s=None))
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    now = [1_000_000.0]
    with open_store(url) as store:
        manager = LeaseManager(store, clock=lambda: now[0], retention_s=10**9)
        for index, held in enumerate((12.0, 14.0, 13.0)):  # purge_a held its lease a median 13 s
            claim = TableClaim(
                str(table_key(table)),
                Operation(OperationKind.DELETE, predicate="p = 'a'"),
                engine_profile("delta-rs"),
                TableConfig(partition_columns=("p",)),
            )
            request = LeaseRequest(
                claims=(claim,),
                owner=Owner(dag_id="guarded", task_id="purge_a", run_id=f"run {index}"),
                ttl_s=600,
                request_id=f"purge_a-{index}",
            )
            manager.acquire(request)
            now[0] += held
            assert manager.release(request.request_id, request.owner)
            now[0] += 60
    code, found, err = plan(capsys, str(dag_file), "--format", "json", "--store", url)
    assert code == 0, err
    tasks = {t["task"]: t for t in found["tasks"]}
    # purge_a declares none: the median of its recorded holds; purge_b declares 30 s, which wins as in the hook
    assert (tasks["purge_a"]["duration_s"], tasks["purge_a"]["duration_source"]) == (13.0, "recorded")
    assert (tasks["purge_b"]["duration_s"], tasks["purge_b"]["duration_source"]) == (30.0, "declared")
    # the table not read: its configuration as the lease manager last used it, from the same store
    code, found, err = plan(capsys, str(dag_file), "--format", "json", "--store", url, "--no-read")
    assert code == 0, err
    (recorded,) = found["tables"]
    assert recorded["config_source"] == "recorded" and recorded["config"]["partition_columns"] == ["p"]
    assert recorded["side_by_side"] == [["purge_a", "purge_b"]]


TEMPLATED_TABLE_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from deltaguard.operators.dml import DeltaDeleteOperator

with DAG("templated_table", schedule=None, start_date=datetime(2026, 1, 1), params={{"t": "{table}"}}):
    DeltaDeleteOperator(task_id="purge_any", table="{{{{ params.t }}}}", predicate="p = 'a'", expected_duration=20)
    DeltaDeleteOperator(task_id="purge_b", table="{table}", predicate="p = 'b'", expected_duration=30)
"""


def test_a_table_named_by_a_template_is_planned_beside_every_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = partitioned_table(tmp_path / "t")
    dag_file = tmp_path / "templated.py"
    dag_file.write_text(TEMPLATED_TABLE_DAG.format(table=table))
    code, found, err = plan(capsys, str(dag_file), "--format", "json", "--no-store")
    assert code == 0, err
    # the template may name the same table: the two DELETEs are not planned to overlap
    assert found["makespan"]["deltaguard"]["makespan_s"] == pytest.approx(50 + DEFAULT_HANDOFF_S + AROUND)
    assert found["makespan"]["all_at_once"]["makespan_s"] == pytest.approx(30 + AROUND)
    assert any("named by a template" in a for a in found["assumptions"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/no/such/dags"], "no such DAG file or folder"),
        (["/no/such/dags", "--out", "plan.txt"], "--out writes a .svg or .png chart"),
        (["/no/such/dags", "--workers", "0"], "--workers must be at least 1"),
        (["/no/such/dags", "--worker-slots", "-1"], "--worker-slots must be at least 0"),
        (["/no/such/dags", "--mapped-instances", "0"], "--mapped-instances must be at least 1"),
        (["/no/such/dags", "--start-s", "-1"], "--start-s must be a finite number >= 0"),
        (["/no/such/dags", "--end-s", "inf"], "--end-s must be a finite number >= 0"),
        (["/no/such/dags", "--phase-wait-s", "-1"], "--phase-wait-s must be a finite number >= 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = plan(capsys, *args)
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("AIRFLOW__DELTAGUARD__PHASE_WAIT", "five", "[deltaguard] phase_wait must be a number of seconds"),
        ("AIRFLOW__DELTAGUARD__WORKER_SLOTS", "eight", "[deltaguard] worker_slots must be a whole number"),
        ("AIRFLOW__DELTAGUARD__POLL_INTERVAL", "-1", "[deltaguard] poll_interval must be positive"),
    ],
)
def test_a_bad_setting_of_the_deployment_is_named_not_replaced(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    message: str,
) -> None:
    dag_file = tmp_path / "guarded.py"
    dag_file.write_text(CHECK_DAG.format(table=partitioned_table(tmp_path / "t"), b="b", a_s=30))
    monkeypatch.setenv(variable, value)
    code, out, err = plan(capsys, str(dag_file), "--no-store")
    assert code == 2 and out == "" and message in err, err


def test_a_bad_table_document_or_baseline_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = partitioned_table(tmp_path / "t")
    dag_file = tmp_path / "guarded.py"
    dag_file.write_text(CHECK_DAG.format(table=table, b="b", a_s=30))
    document = tmp_path / "tables.json"
    document.write_text(json.dumps({table: {"partition_columns": "p"}}))
    code, _, err = plan(capsys, str(dag_file), "--no-store", "--tables", str(document))
    assert code == 2 and "partition_columns" in err
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"format": 1, "dag_id": "another"}))
    code, _, err = plan(capsys, str(dag_file), "--no-store", "--check", str(baseline))
    assert code == 2 and "the baseline plans DAG 'another'" in err


def test_the_race_for_a_table_s_first_lease_is_played_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = partitioned_table(tmp_path / "t")
    dag_file = tmp_path / "guarded.py"
    # both DELETEs purge partition a: they serialize, and Airflow starts them together, so either may ask
    # for the table first
    dag_file.write_text(CHECK_DAG.format(table=table, b="a", a_s=10))
    code, found, err = plan(capsys, str(dag_file), "--format", "json", "--no-store", "--phase-wait-s", "0")
    assert code == 0, err
    race = found["deltaguard_range"]
    assert (
        race["first_to_ask"] == {table: ["purge_a", "purge_b"]} and race["plays"] == 3 and race["exhaustive"]
    )
    # purge_a (10 s) first: purge_b waits in its worker for the imminent release and writes at once;
    # purge_b (30 s) first: purge_a defers and comes back one hand-off after the release
    assert race["best_s"] == pytest.approx(40 + AROUND)
    assert race["worst_s"] == pytest.approx(40 + DEFAULT_HANDOFF_S + AROUND)
    assert race["best_first"] == ["purge_a"] and race["worst_first"] == ["purge_b"]
    assert found["makespan"]["deltaguard"]["makespan_s"] in (race["best_s"], race["worst_s"])
    code, text, _ = plan(capsys, str(dag_file), "--no-store", "--phase-wait-s", "0")
    assert code == 0 and "whichever write asks first for a table" in text
    # with the deployment's phase wait, purge_a (the later phase) lets purge_b ask first in every play
    code, found, err = plan(capsys, str(dag_file), "--format", "json", "--no-store")
    assert code == 0, err
    race = found["deltaguard_range"]
    assert race["best_s"] == race["worst_s"] == found["makespan"]["deltaguard"]["makespan_s"]
    assert race["best_s"] == pytest.approx(40 + DEFAULT_HANDOFF_S + AROUND)


def test_the_lease_manager_s_slot_gate_is_played(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = partitioned_table(tmp_path / "t")
    dag_file = tmp_path / "guarded.py"
    # two DELETEs of different partitions: side by side, unless the gate lets only one lease be held
    dag_file.write_text(CHECK_DAG.format(table=table, b="b", a_s=10))
    code, free, err = plan(capsys, str(dag_file), "--format", "json", "--no-store", "--worker-slots", "0")
    assert code == 0, err
    assert free["makespan"]["deltaguard"]["makespan_s"] == pytest.approx(30 + AROUND)
    assert any("no slot gate" in a for a in free["assumptions"])
    code, gated, err = plan(capsys, str(dag_file), "--format", "json", "--no-store", "--worker-slots", "1")
    assert code == 0, err
    # one after the other, the second granted at the first's release and back one hand-off later
    assert gated["makespan"]["deltaguard"]["makespan_s"] == pytest.approx(40 + DEFAULT_HANDOFF_S + AROUND)
    assert any(
        "only while fewer than 1 are held (slot gate, --worker-slots)" in a for a in gated["assumptions"]
    )
