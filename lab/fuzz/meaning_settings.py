"""Engine versions and session settings: the meaning fuzzer's generators of what the model takes as input.

Neither needs a table: the model takes them in :class:`~deltaguard.core.profiles.EngineProfile`, and the
engine at hand (deltalake 1.6.6) can only ever be one of them, so each case checks the rule the model must
keep rather than an engine's run (ADR 0036):

* **Versions.** A version string the profiles were never measured on (a release candidate, a post-release,
  a local build, another release) must be judged by the strictest profile of its family, and a
  ``no_conflict`` must say so. Which strings name the measured release is decided by PEP 440
  (``packaging.version``) for deltalake and delta-spark, and by the runtime's ``major.minor`` (13.3 and
  above, the page's "and above") for Databricks. A case is a candidate when the model takes an unmeasured
  version as measured, when its verdict on a pair is laxer than under the measured version, or when it
  allows a pair without naming the version.
* **Session settings.** ``spark.sql.ansi.enabled`` and ``spark.sql.session.timeZone`` as each write's
  session has them: pinned, unpinned (``None``), a zone Spark does not know. An unpinned or unknown setting
  may have any value on the cluster, so the verdict must be at least as strict as under every concrete value
  it may take, for each of the two writes' sessions. ``parse_ansi``, the engine's reading of the setting's
  text, must never read as on a text Spark does not read as on (``String.trim`` then a case-insensitive
  ``true``/``false``; anything else is refused by Spark). The settings that change which rows a write
  touches (``replaceWhere.constraintCheck.enabled``, ``replaceWhere.dataColumns.enabled``) and schema
  auto-merge are not model inputs: the Spark engine pins them for each statement to the value the model
  assumes. Each case sets them in a stand-in session (unset, or a generated text) and checks that the
  statement runs with the pinned values and that the session gets its own back.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
import zoneinfo
from dataclasses import dataclass
from typing import Any

#: Version strings per family around the measured one (``{m}``: the measured version itself).
VERSION_TEXTS: dict[str, tuple[str, ...]] = {
    "delta-rs": (
        "{m}", "{m}", " {m} ", "v{m}", "{m}.0", "{m}rc1", "{m}-rc1", "{m}-1", "{m}.post1", "{m}+local",
        "{m}.dev0", "{m}a1", "{m}-SNAPSHOT", "{m}.1", "1.6.7", "1.6.5", "1.6", "0.1.0", "2.0.0", "01.6.6",
    ),
    "delta-spark": (
        "{m}", "{m}", "{m}rc1", "{m}-SNAPSHOT", "{m}-1", "{m}+local", "{m}.1", "4.4", "4.3.0", "5.0",
        "3.2.0", "v{m}", "{m}.0",
    ),
    "databricks": (
        "13.3", "14.3", "15.4", "13.3 LTS", "14.3.x-scala2.12", "15.4.x-photon-scala2.12", "13.2", "12.2",
        "11.3.x-scala2.12", "13", "9.1", "16.0", "13.3.x-snapshot-scala2.12",
    ),
}  # fmt: skip
_MEASURED = {"delta-rs": "1.6.6", "delta-spark": "4.4.0"}
_DATABRICKS = re.compile(r"^\s*(\d+)\.(\d+)(?:\.x-[a-z0-9.-]+| LTS)?\s*$")


def truly_measured(family: str, text: str) -> bool:
    """Whether ``text`` names a release the model's rules were measured (or documented) on."""
    if family == "databricks":
        match = _DATABRICKS.match(text)
        if match is None or "snapshot" in text:
            return False
        return (int(match.group(1)), int(match.group(2))) >= (13, 3)
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text.strip()) == Version(_MEASURED[family])
    except InvalidVersion:
        return False


@dataclass(frozen=True)
class VersionCase:
    family: str
    version: str

    def describe(self) -> dict[str, Any]:
        return {"kind": "version", "family": self.family, "version": self.version}


def gen_version_case(rng: random.Random) -> VersionCase:
    family = rng.choice(tuple(VERSION_TEXTS))
    text = rng.choice(VERSION_TEXTS[family]).replace("{m}", _MEASURED.get(family, "13.3"))
    return VersionCase(family, text)


def measured_profile(family: str) -> Any:
    from deltaguard.core.profiles import EngineName, EngineProfile

    return EngineProfile(EngineName(family), _MEASURED.get(family, "14.3"))


def check_version(case: VersionCase, pairs: list[tuple[Any, Any, Any]]) -> tuple[list[str], bool]:
    """What the model gets wrong about ``case`` on ``pairs`` (``(a, b, table)``), and whether it was more
    cautious than needed (a measured version judged as unmeasured).

    :returns: the problems found (empty: none), and the precision flag.
    """
    from deltaguard.core.closed_world import version_caveat
    from deltaguard.core.model import pair_verdict
    from deltaguard.core.profiles import EngineName, EngineProfile

    try:
        profile = EngineProfile(EngineName(case.family), case.version)
    except ValueError:
        return [], False  # refused as a profile: nothing is judged with it
    measured = truly_measured(case.family, case.version)
    caveat = version_caveat(profile)
    if measured:
        return [], caveat is not None
    problems = []
    if caveat is None:
        problems.append(f"{case.family} {case.version!r} is judged as measured")
    reference = measured_profile(case.family)
    for a, b, table in pairs:
        verdict = pair_verdict(a, b, table, profile)
        if verdict.conflict:
            continue
        if pair_verdict(a, b, table, reference).conflict:
            problems.append(f"allows a pair the measured profile refuses: {verdict.reason}")
        elif "never" not in verdict.reason:
            problems.append(f"allows a pair without naming the version: {verdict.reason}")
    return problems, False


# ------------------------------------------------------------------------------------------ session settings

#: Text of ``spark.sql.ansi.enabled`` as a session may hold it.
ANSI_TEXTS: tuple[str, ...] = (
    "true", "false", "TRUE", "False", " true ", "true\n", "1", "0", "yes", "on", "off", "", "tru", "t",
)  # fmt: skip
#: Session time zones (``None``: not known); some are not zones Spark knows.
ZONES: tuple[str | None, ...] = (
    None, "UTC", "Etc/UTC", "utc", "Europe/Paris", "+02:00", "GMT", "Z", "America/Los_Angeles",
    "Mars/Olympus", "", "Asia/Kolkata",
)  # fmt: skip
#: Concrete zones an unknown zone may be (far apart, so a literal read in each names different instants).
CONCRETE_ZONES: tuple[str, ...] = ("UTC", "Pacific/Kiritimati", "Etc/GMT+12", "Europe/Paris")
_OFFSET = re.compile(r"^[+-]\d{2}:\d{2}$")


def spark_reads_ansi(text: str) -> bool | None:
    """How Spark reads a boolean setting: ``String.trim`` then a case-insensitive ``true``/``false``;
    ``None``: Spark refuses the text."""
    value = text.strip(" \t\n\r\x0b\x0c\x00").lower()
    return True if value == "true" else False if value == "false" else None


def zone_meanings(zone: str | None) -> tuple[str | None, ...]:
    """The concrete zones a session's zone setting may mean."""
    if zone is None or not zone.strip():
        return CONCRETE_ZONES
    if zone in zoneinfo.available_timezones() or _OFFSET.match(zone):
        return (zone,)
    return CONCRETE_ZONES  # a zone Spark does not know: the session's is something else


@dataclass(frozen=True)
class Session:
    """One write's session: ANSI (``None``: not known) and zone (``None``: not known)."""

    ansi: bool | None
    zone: str | None

    def meanings(self) -> list[Session]:
        ansi = (True, False) if self.ansi is None else (self.ansi,)
        return [Session(a, z) for a in ansi for z in zone_meanings(self.zone)]


#: Partition columns of the settings table: an INT, a TIMESTAMP and a STRING.
SETTINGS_COLUMNS: tuple[tuple[str, str], ...] = (("k", "integer"), ("ts", "timestamp"), ("s", "string"))
#: Atoms on each column: numeric text Spark may truncate, timestamp text without a zone, text of numbers.
SETTINGS_ATOMS: dict[str, tuple[str, ...]] = {
    "k": ("k = 1", "k = '1.5'", "k = '1'", "k = 2", "k = '01'", "k IN ('1', 2)", "k = ' 1'", "k > '1.5'"),
    "ts": (
        "ts = '2024-01-01 00:00:00'", "ts = '2024-01-01 01:00:00'", "ts = TIMESTAMP '2024-01-01 00:00:00'",
        "ts >= '2024-01-01'", "ts < '2024-01-01 02:00:00'", "ts = '2024-01-01T00:00:00Z'",
    ),
    "s": ("s = '1'", "s = 1", "s = '01'", "s = 'a'"),
}  # fmt: skip


def settings_table() -> Any:
    from deltaguard.core.table_config import TableConfig

    return TableConfig(
        partition_columns=tuple(name for name, _ in SETTINGS_COLUMNS),
        timestamp_columns=("ts",),
        column_types=(*SETTINGS_COLUMNS, ("id", "long"), ("v", "string")),
    )


#: Texts the write-scope settings may hold in a session (``None``: unset).
PIN_TEXTS: tuple[str | None, ...] = (None, "false", "FALSE", " false", "true", "0", "no")


@dataclass(frozen=True)
class SettingsCase:
    family: str
    sessions: tuple[Session, Session]
    predicates: tuple[str, str]
    ansi_text: str
    pins: tuple[str | None, ...] = ()

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "settings",
            "family": self.family,
            "sessions": [dataclasses.asdict(s) for s in self.sessions],
            "predicates": list(self.predicates),
            "ansi_text": self.ansi_text,
            "pins": list(self.pins),
        }


def gen_settings_case(rng: random.Random) -> SettingsCase:
    column = rng.choice(SETTINGS_COLUMNS)[0]
    first, second = rng.choice(SETTINGS_ATOMS[column]), rng.choice(SETTINGS_ATOMS[column])
    sessions = tuple(Session(rng.choice((None, True, False)), rng.choice(ZONES)) for _ in range(2))
    return SettingsCase(
        rng.choice(("delta-spark", "databricks")),
        (sessions[0], sessions[1]),
        (first, second),
        rng.choice(ANSI_TEXTS),
        tuple(rng.choice(PIN_TEXTS) for _ in range(3)),
    )


def _profile(family: str, session: Session) -> Any:
    return dataclasses.replace(
        measured_profile(family), session_ansi=session.ansi, session_time_zone=session.zone
    )


def check_settings(case: SettingsCase) -> list[str]:
    """Where the model reads an unpinned or unknown setting as permissive (empty: nowhere)."""
    from deltaguard.core.model import pair_verdict
    from deltaguard.core.operations import Operation, OperationKind
    from deltaguard.engines.spark.session import parse_ansi

    problems = check_pins(case.pins)
    read = parse_ansi(case.ansi_text)
    if read is not None and read != spark_reads_ansi(case.ansi_text):
        problems.append(f"spark.sql.ansi.enabled = {case.ansi_text!r} read as {read}")
    table = settings_table()

    def verdict(sessions: tuple[Session, Session]) -> Any:
        a, b = (
            Operation(OperationKind.DELETE, predicate=p, engine=_profile(case.family, s))
            for p, s in zip(case.predicates, sessions, strict=True)
        )
        return pair_verdict(a, b, table, _profile(case.family, sessions[0]))

    given = verdict(case.sessions)
    if given.conflict:
        return problems
    for meanings in itertools.product(case.sessions[0].meanings(), case.sessions[1].meanings()):
        if meanings == case.sessions:
            continue
        concrete = verdict((meanings[0], meanings[1]))
        if concrete.conflict:
            problems.append(
                f"allowed with sessions {case.sessions}, refused with {meanings}: {concrete.reason}"
            )
            break
    return problems


class _Session:
    """A stand-in Spark session: its runtime conf, and the conf each statement ran with."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)
        self.conf = self
        self.ran: list[dict[str, str]] = []

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)

    def sql(self, _statement: str) -> _Session:
        self.ran.append(dict(self.values))
        return self

    def collect(self) -> list[Any]:
        return []


def check_pins(texts: tuple[str | None, ...]) -> list[str]:
    """Where a statement of the Spark engine runs with a write-scope setting other than the model assumes,
    or leaves the session's own value changed (empty: nowhere)."""
    from deltaguard.engines.spark import ops
    from deltaguard.engines.spark.target import SparkTarget
    from deltaguard.engines.specs import WriteContext

    assumed = {**ops.WRITE_SCOPE_CONFS, ops.SCHEMA_AUTO_MERGE_CONF: "false"}
    before = {key: text for key, text in zip(assumed, texts, strict=False) if text is not None}
    session = _Session(before)
    run = ops.under_txn_confs(lambda spark, target, spec, ready: spark.sql("UPDATE ...").collect())
    run(session, SparkTarget.parse("/data/t"), None, WriteContext(), None)  # type: ignore[arg-type]
    problems = [
        f"{key} = {session.ran[0].get(key)!r} while the statement ran (session: {before.get(key)!r})"
        for key, value in assumed.items()
        if session.ran[0].get(key) != value
    ]
    restored = {key: session.values.get(key) for key in assumed if key in session.values}
    if restored != before:
        problems.append(f"the session's settings {before} became {restored}")
    return problems
