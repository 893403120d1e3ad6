"""Differential fuzzing of the conflict model against delta-rs, on a fixed CI budget.

Hypothesis generates Spark SQL write pairs and triples on varied layouts (derandomized, so CI sees the same
cases every run); every case the model allows runs on real delta-rs tables in every commit order from
stale snapshots and must equal a serial execution. Findings already saved under ``fuzz_regressions/`` are
replayed by ``test_fuzz_regressions.py``; a new class of finding fails this test with the shrunk case.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from deltaguard.core.decision import Decision, Verdict
from deltaguard.core.sql.classify import classify_sql
from lab.conformance.cells import Observed
from lab.fuzz import check as fuzz_check
from lab.fuzz.cases import FuzzCase, FuzzLayout, FuzzStatement
from lab.fuzz.check import CaseResult, DifferentialRun, check_case
from lab.fuzz.engine import DeltaRsDifferentialEngine
from lab.fuzz.strategies import cases

REGRESSIONS = Path(__file__).parent / "fuzz_regressions"
#: finding classes already saved as regression cases (replayed, with their expected outcome, elsewhere)
KNOWN_CLASSES = frozenset(
    json.loads(path.read_text(encoding="utf-8"))["class"] for path in sorted(REGRESSIONS.glob("*.json"))
)

ENGINE = DeltaRsDifferentialEngine()
CI_EXAMPLES = 40


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> DifferentialRun:
    return DifferentialRun(ENGINE, tmp_path_factory.mktemp("fuzz"))


def test_generated_cases_are_sound_on_delta_rs(run: DifferentialRun) -> None:
    seen: list[CaseResult] = []

    @settings(
        max_examples=CI_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(cases())
    def probe(case: FuzzCase) -> None:
        result = run.check(case)
        seen.append(result)
        assert not result.crashed, result.to_json()
        if result.unsound and result.explained_by(KNOWN_CLASSES) is None:
            pytest.fail(
                "unsound verdict (save it under fuzz_regressions/):\n"
                + json.dumps(result.to_json(), indent=2)
            )

    probe()
    # the budget must reach the engine, or the test proves nothing about soundness
    assert len(seen) >= CI_EXAMPLES
    assert sum(r.executed for r in seen) >= 3, [r.views for r in seen]


def _break_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the model allow everything, as a model with a soundness bug would."""

    def allow_all(candidate, running, table, profile):  # type: ignore[no-untyped-def]
        return Decision(verdict=Verdict.NO_CONFLICT, rules=("broken",))

    monkeypatch.setattr(fuzz_check, "decide", allow_all)


def _statement(sql: str) -> FuzzStatement:
    return FuzzStatement(sql, "sql")


def test_the_check_reports_a_model_that_allows_a_real_conflict(monkeypatch: pytest.MonkeyPatch) -> None:
    # two UPDATEs of the same rows conflict in delta-rs; a model that allows them must be reported
    case = FuzzCase(
        FuzzLayout(partition_by=("p",)),
        (
            _statement("UPDATE t SET v = v + 1 WHERE p = 'a'"),
            _statement("UPDATE t SET v = v * 2 WHERE p = 'a'"),
        ),
    )
    assert not check_case(case, ENGINE).unsound  # the real model calls it a conflict
    _break_model(monkeypatch)
    result = check_case(case, ENGINE)
    assert result.allowed_by == ("sql",)
    assert result.unsound
    assert {o.observed for o in result.orders} == {Observed.CONFLICT}


def _copy(source: str, target: str, shift: int) -> FuzzStatement:
    select = f"SELECT id + {shift} AS id, '{target}' AS p, d, v, s FROM t WHERE p = '{source}'"
    return FuzzStatement(
        f"INSERT INTO t {select}", "spec", {"type": "append", "select": select}, ("self_read",)
    )


def test_the_check_reports_silent_corruption_from_stale_self_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    # each INSERT ... SELECT copies the rows the other one appends to; serially the second copies the
    # first's rows too, concurrently both read the old snapshot: delta-rs commits both appends, and the table
    # matches no serial order
    case = FuzzCase(FuzzLayout(partition_by=("p",)), (_copy("a", "b", 100), _copy("b", "a", 200)))
    _break_model(monkeypatch)
    result = check_case(case, ENGINE)
    assert result.unsound
    assert {o.observed for o in result.orders} == {Observed.CORRUPT}, result.to_json()


def test_a_sound_allowance_is_not_reported() -> None:
    # disjoint partitions: the model allows the pair and delta-rs commits both in either order
    case = FuzzCase(
        FuzzLayout(partition_by=("p",)),
        (_statement("DELETE FROM t WHERE p = 'a'"), _statement("DELETE FROM t WHERE p = 'b'")),
    )
    result = check_case(case, ENGINE)
    assert result.allowed_by == ("sql",)
    assert result.engine_allows and not result.unsound
    assert [o.observed for o in result.orders] == [Observed.COMMIT, Observed.COMMIT]
    assert set(result.serial) == {"A,B", "B,A"}


def test_triples_run_every_commit_order() -> None:
    case = FuzzCase(
        FuzzLayout(partition_by=("p",)),
        tuple(_statement(f"DELETE FROM t WHERE p = '{p}'") for p in ("a", "b", "c")),
    )
    result = check_case(case, ENGINE)
    assert len(result.orders) == 6 and len(result.serial) == 6
    assert result.engine_allows and not result.unsound


def test_a_statement_delta_rs_cannot_run_is_counted_not_executed() -> None:
    case = FuzzCase(
        FuzzLayout(),
        (
            _statement("DELETE FROM t WHERE id IN (SELECT id FROM t WHERE v > 30)"),
            _statement("DELETE FROM t WHERE p = 'b'"),
        ),
    )
    result = check_case(case, ENGINE, run_conflicts=True)
    assert result.not_executable
    assert not result.executed and not result.unsound


@settings(max_examples=150, derandomize=True, deadline=None, database=None)
@given(cases())
def test_generated_sql_is_what_the_classifier_accepts(case: FuzzCase) -> None:
    # the generator writes realistic Spark SQL: every statement classifies, none is refused as garbage
    for statement in case.statements:
        operation = classify_sql(statement.sql).operation
        assert operation.sql == statement.sql
        if "self_read" in statement.tags and statement.kind == "INSERT SELECT":
            assert operation.reads_target


@settings(max_examples=50, derandomize=True, deadline=None, database=None)
@given(cases())
def test_cases_round_trip_through_json(case: FuzzCase) -> None:
    assert FuzzCase.from_json(json.loads(json.dumps(case.to_json()))) == case


def test_the_long_run_saves_a_finding_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hypothesis import strategies as st

    from lab.fuzz.run import fuzz

    case = FuzzCase(
        FuzzLayout(partition_by=("p",)),
        (_statement("UPDATE t SET v = v + 1 WHERE p = 'a'"), _statement("DELETE FROM t WHERE p = 'a'")),
    )
    _break_model(monkeypatch)
    stats = fuzz(
        ENGINE,
        tmp_path / "work",
        minutes=0.01,
        seed=1,
        out_dir=tmp_path / "found",
        examples_per_round=2,
        strategy=st.just(case),
        hostile_examples=0,
    )
    saved = [json.loads(Path(p).read_text(encoding="utf-8")) for p in stats.saved]
    assert len(saved) == 1, stats.to_json()
    assert saved[0]["status"] == "open" and saved[0]["class"] in stats.unsound_classes
    assert FuzzCase.from_json(saved[0]["case"]) == case
    assert set(saved[0]["serial"]) == {"A,B", "B,A"}
    assert stats.to_json()["unsound_cases"] == 1


def test_the_fuzz_command_prints_a_summary_and_exits_by_its_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lab.fuzz.__main__ import main

    out = tmp_path / "summary.json"
    budget = ["--minutes", "0.01", "--examples-per-round", "2", "--seed", "5"]
    code = main([*budget, "--save-dir", str(tmp_path / "found"), "--out", str(out), "--format", "json"])
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text(encoding="utf-8"))
    assert printed["cases_generated"] >= 1 and printed["hostile_inputs"] >= 1
    assert printed["engine"] == "delta-rs"
    assert code == (1 if printed["unsound_cases"] or printed["crashes"] else 0)


def test_the_fuzz_summary_is_a_few_lines_and_the_bar_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lab.fuzz.__main__ import main

    budget = ["--minutes", "0.01", "--examples-per-round", "2", "--seed", "5", "--save-dir", str(tmp_path)]
    code = main([*budget, "--progress"])
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("deltaguard fuzz: ") and len(lines) < 12
    assert "{" not in captured.out  # no JSON dump
    assert code == (0 if "no unsound case, no crash" in lines[0] else 1)
    # stderr is not a terminal here: the asked-for progress is plain counted lines, one per round
    progress = [line for line in captured.err.splitlines() if line.strip()]
    assert progress and all(re.match(r"\[\d+/\d+\] ", line) for line in progress), progress
    assert any("round" in line for line in progress)


def test_the_fuzz_command_rejects_a_budget_of_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    from lab.fuzz.__main__ import main

    assert main(["--minutes", "0"]) == 2
    assert "--minutes" in capsys.readouterr().err
