"""The closed world: the only ways the conflict rules read what they do not derive themselves (ADR 0036).

The model may tell two writes apart only through facts it has positively established. Table property keys,
property values, the engine version and the functions of a condition come from outside the model; each is
read here, and whatever is not positively understood comes back as a reason (a string naming what and why)
that the rules turn into ``conflict`` (or, for row-level concurrency, into the file-level rules):

* :func:`table_property` reads a property by its exact key, as deltalake 1.6.6 and delta-spark 4.4.0 do;
  :func:`table_unknowns` lists the keys the engines would not read as the model does (a known key spelled
  in another case, an unknown ``delta.*`` key, a boolean value that is neither ``true`` nor ``false``);
* :func:`unknown_settings` lists the session settings of a Spark engine whose effect the model does not
  know (every pair that engine commits is then a conflict);
* :func:`version_caveat` says when the engine version was never measured (:data:`MEASURED_VERSIONS`): the
  rule modules then judge with the strictest profile of the engine's family;
* :func:`is_deterministic` says whether a function of a condition is known to be deterministic (the
  row-level limitations of :func:`~deltaguard.core.sql.row_level.row_level_limitations` ask it);
* :func:`untyped_columns` lists the columns of a condition whose type is complex or not known.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Protocol

from sqlglot import exp

from deltaguard.core.profiles import EngineName, EngineProfile


class TableConfig(Protocol):
    """What this module reads of a :class:`deltaguard.core.table_config.TableConfig` (named structurally:
    ``table_config`` reads predicates, which ask this module which functions are deterministic)."""

    @property
    def properties(self) -> Mapping[str, str]: ...

    @property
    def unknown(self) -> tuple[str, ...]: ...

    def column_type(self, column: str) -> str | None: ...


# ------------------------------------------------------------------------------------------ properties

#: ``delta.*`` table properties the conflict model knows, spelled exactly as Delta defines them. Most do not
#: change conflict behaviour; they are listed so that they do not make the model conservative. The engines
#: read a property by its exact key (deltalake 1.6.6: ``TableProperties`` matches the key as written;
#: delta-spark 4.4.0: ``DeltaConfig.fromMetaData`` looks the key up in the configuration map), so another
#: spelling of one of these keys is not that property to them.
KNOWN_DELTA_PROPERTIES: frozenset[str] = frozenset(
    {
        "delta.appendOnly",
        "delta.isolationLevel",
        "delta.enableDeletionVectors",
        "delta.enableRowTracking",
        "delta.enableChangeDataFeed",
        "delta.enableTypeWidening",
        "delta.enableInCommitTimestamps",
        "delta.inCommitTimestampEnablementVersion",
        "delta.inCommitTimestampEnablementTimestamp",
        "delta.enableExpiredLogCleanup",
        "delta.enableIcebergCompatV1",
        "delta.enableIcebergCompatV2",
        "delta.checkpointInterval",
        "delta.checkpointPolicy",
        "delta.logRetentionDuration",
        "delta.deletedFileRetentionDuration",
        "delta.setTransactionRetentionDuration",
        "delta.dataSkippingNumIndexedCols",
        "delta.dataSkippingStatsColumns",
        "delta.targetFileSize",
        "delta.tuneFileSizesForRewrites",
        "delta.randomizeFilePrefixes",
        "delta.randomPrefixLength",
        "delta.minReaderVersion",
        "delta.minWriterVersion",
        "delta.autoOptimize.optimizeWrite",
        "delta.autoOptimize.autoCompact",
        "delta.compatibility.symlinkFormatManifest.enabled",
        "delta.parquet.compression.codec",
    }
)

#: Families of ``delta.*`` properties known as a whole, spelled exactly. ``delta.feature.<name>`` is known
#: when ``<name>`` is a known feature.
KNOWN_PROPERTY_PREFIXES: tuple[str, ...] = (
    "delta.constraints.",
    "delta.columnMapping.",
    "delta.checkpoint.",
    "delta.rowTracking.",
    "delta.universalFormat.",
)

#: Reader/writer table features the conflict model knows (lower-case, as spelled in the protocol).
KNOWN_TABLE_FEATURES: frozenset[str] = frozenset(
    name.lower()
    for name in (
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "columnMapping",
        "identityColumns",
        "deletionVectors",
        "rowTracking",
        "timestampNtz",
        "domainMetadata",
        "v2Checkpoint",
        "icebergCompatV1",
        "icebergCompatV2",
        "clustering",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
        "inCommitTimestamp",
        "variantType",
        "variantType-preview",
        "variantShredding-preview",
        "allowColumnDefaults",
        "checkpointProtection",
        "timestampNanos",
        "materializePartitionColumns",
    )
)

#: Properties the rules read as booleans. Only ``true`` and ``false`` mean the same to every engine: Spark's
#: ``String.toBoolean`` takes any case, deltalake 1.6.6 only the lower case (measured: ``delta.appendOnly =
#: TRUE`` does not stop a DELETE, ``true`` does; tests/engines/test_deltars_property_keys.py).
BOOLEAN_PROPERTIES: frozenset[str] = frozenset({"delta.enableDeletionVectors"})

_DELTA_PREFIX = "delta."
_FEATURE_PREFIX = "delta.feature."
_LOWER_KNOWN: dict[str, str] = {key.lower(): key for key in KNOWN_DELTA_PROPERTIES}
_LOWER_PREFIXES: dict[str, str] = {prefix.lower(): prefix for prefix in KNOWN_PROPERTY_PREFIXES}


def is_known_property(key: str) -> bool:
    """Whether the conflict model knows a table property by this exact key.

    A key without the ``delta.`` prefix (in any case) is a user property no engine interprets: known.

    :param key: the key as stored in the Delta log.
    """
    if not key.lower().startswith(_DELTA_PREFIX):
        return True
    if key in KNOWN_DELTA_PROPERTIES or key.startswith(KNOWN_PROPERTY_PREFIXES):
        return True
    if key.startswith(_FEATURE_PREFIX):
        return key.removeprefix(_FEATURE_PREFIX).lower() in KNOWN_TABLE_FEATURES
    return False


def _canonical(key: str) -> str | None:
    """The known key (or known family prefix) ``key`` spells in another case, if any."""
    lowered = key.lower()
    if lowered in _LOWER_KNOWN:
        return _LOWER_KNOWN[lowered]
    for prefix, spelled in _LOWER_PREFIXES.items():
        if lowered.startswith(prefix):
            return spelled + key[len(prefix) :]
    if lowered.startswith(_FEATURE_PREFIX) and not key.startswith(_FEATURE_PREFIX):
        return _FEATURE_PREFIX + key[len(_FEATURE_PREFIX) :]
    return None


def property_problems(properties: Mapping[str, str]) -> tuple[str, ...]:
    """The stored properties the model does not positively understand, each with why (in key order, so the
    text never depends on the order the log listed them in).

    :param properties: table properties exactly as stored in the Delta log.
    """
    problems: list[str] = []
    for key in sorted(properties):
        if not is_known_property(key):
            canonical = _canonical(key)
            if canonical is not None:
                problems.append(
                    f"property {key} is spelled differently from {canonical}: deltalake 1.6.6 and delta-spark "
                    "4.4.0 read only the exact key, so whether an engine honours it is not known"
                )
            else:
                problems.append(f"property {key} has no meaning the conflict model knows")
        elif key in BOOLEAN_PROPERTIES and properties[key] not in ("true", "false"):
            problems.append(
                f"property {key} = {properties[key]!r} is neither true nor false (Spark reads any case, "
                "deltalake 1.6.6 only the lower case)"
            )
    return tuple(problems)


def table_unknowns(table: TableConfig) -> tuple[str, ...]:
    """Everything about ``table`` the model does not understand: its declared unknowns and its properties'
    problems (:func:`property_problems`). Any entry makes every pair on the table conflict.

    :param table: the table configuration.
    """
    problems = property_problems(table.properties)
    # The engine layer lists such a property as "property <key>": the problem says more, and says it once.
    explained = {f"property {key}" for key in table.properties if not is_known_property(key)}
    declared = (f"unknown table setting {item!r}" for item in table.unknown if item not in explained)
    return tuple(dict.fromkeys((*declared, *problems)))


def table_property(table: TableConfig, key: str) -> str | None:
    """A known table property by its exact key (``None``: absent).

    :param table: the table configuration.
    :param key: a key of :data:`KNOWN_DELTA_PROPERTIES` or of a known family.
    :raises ValueError: for a key the model does not know (a programming error in a rule).
    """
    if not key.startswith(_DELTA_PREFIX) or not is_known_property(key):
        raise ValueError(f"the conflict model does not know table property {key!r}")
    return table.properties.get(key)


def property_flag(table: TableConfig, key: str) -> bool | None:
    """A boolean table property: ``True``/``False`` as stored, ``None`` when absent or not understood
    (:func:`table_unknowns` then reports the value, so the pair is a conflict anyway).

    :param table: the table configuration.
    :param key: a key of :data:`BOOLEAN_PROPERTIES`.
    """
    raw = table_property(table, key)
    if raw not in ("true", "false"):
        return None
    return raw == "true"


# ----------------------------------------------------------------------------------------- session settings

#: The namespaces of the session settings that can change what a write's SQL means or how its commit is
#: checked: Spark SQL's (``SQLConf``) and Delta's (``DeltaSQLConf``, ``spark.databricks.delta.*``).
SETTING_NAMESPACES: tuple[str, ...] = ("spark.sql.", "spark.databricks.")

#: Settings of those namespaces the conflict model understands, spelled exactly: read into the engine
#: profile (ANSI mode, time zone, parser settings, Databricks' row-level preview), pinned by the Spark engine
#: for every write (``engines.spark.ops``), or set by Spark and deltaguard themselves to wire a session
#: (measured on Spark 4.2: a classic and a Spark Connect session list only these besides the prefixes below,
#: before and after delta-spark writes in them).
UNDERSTOOD_SETTINGS: frozenset[str] = frozenset(
    {
        "spark.sql.ansi.enabled",
        "spark.sql.session.timeZone",
        "spark.sql.ansi.doubleQuotedIdentifiers",
        "spark.sql.parser.escapedStringLiterals",
        "spark.databricks.delta.rowLevelConcurrencyPreview",
        "spark.databricks.delta.write.txnAppId",
        "spark.databricks.delta.write.txnVersion",
        "spark.databricks.delta.commitInfo.userMetadata",
        "spark.databricks.delta.schema.autoMerge.enabled",
        "spark.databricks.delta.replaceWhere.constraintCheck.enabled",
        "spark.databricks.delta.replaceWhere.dataColumns.enabled",
        "spark.databricks.delta.optimize.maxFileSize",
        "spark.databricks.delta.snapshotPartitions",
        "spark.sql.shuffle.partitions",
        "spark.sql.warehouse.dir",
        "spark.sql.extensions",
        "spark.sql.catalogImplementation",
        "spark.sql.defaultCatalog",
        "spark.sql.autoBroadcastJoinThreshold",
        "spark.sql.broadcastTimeout",
        # only ever narrows an overwrite (to the partitions written) that the model judges as the whole table
        "spark.sql.sources.partitionOverwriteMode",
        # set by delta-spark 4.4.0 itself in the session of every write (measured): the version it committed,
        # and Parquet field ids (how column-mapped data files name their columns)
        "spark.databricks.delta.lastCommitVersionInSession",
        "spark.sql.parquet.fieldId.read.enabled",
        "spark.sql.parquet.fieldId.write.enabled",
    }
)

#: Families of settings that only wire or tune how Spark executes (catalog plugins, query planning and
#: execution, the Connect server, artifacts, the UI, Arrow transfer), never which rows a condition selects.
UNDERSTOOD_SETTING_PREFIXES: tuple[str, ...] = (
    "spark.sql.catalog.",
    "spark.sql.adaptive.",
    "spark.sql.artifact.",
    "spark.sql.connect.",
    "spark.sql.execution.arrow.",
    "spark.sql.ui.",
    "spark.sql.codegen.",
    "spark.sql.cbo.",
    "spark.databricks.clusterUsageTags.",
)


def unknown_settings(settings: Mapping[str, str]) -> tuple[str, ...]:
    """The session settings whose effect on a write the conflict model does not know, as ``key=value``.

    Only Spark SQL's and Delta's namespaces (:data:`SETTING_NAMESPACES`, in any case) are read; a key there
    that is neither understood exactly (:data:`UNDERSTOOD_SETTINGS`) nor in an understood family is
    unknown, whatever its value: a legacy coercion, another isolation or conflict-detection switch, or a
    known key spelled in another case (Spark reads keys as written).

    :param settings: the settings a session has set (Spark's ``spark.conf.getAll``).
    """
    found = []
    for key, value in sorted(settings.items()):
        if not key.lower().startswith(SETTING_NAMESPACES):
            continue
        if key in UNDERSTOOD_SETTINGS or key.startswith(UNDERSTOOD_SETTING_PREFIXES):
            continue
        shown = str(value) if len(str(value)) <= 60 else f"{str(value)[:57]}..."
        found.append(f"{key}={shown}")
    return tuple(found)


# ---------------------------------------------------------------------------------------- engine versions

#: The engine versions each family was measured (delta-rs, delta-spark) or documented (Databricks) on:
#: ``(lowest, highest)`` inclusive, ``None`` for no bound (versions compare padded with zeros to three parts).
#: delta-rs: deltalake 1.6.6 (ADR 0003); delta-spark: 4.4.0 (ADR 0014); Databricks: the page "Isolation
#: levels and write conflicts" names Runtime 13.3 LTS as its oldest and states its rules for "and above".
MEASURED_VERSIONS: Mapping[EngineName, tuple[tuple[int, ...] | None, tuple[int, ...] | None]] = {
    EngineName.DELTA_RS: ((1, 6, 6), (1, 6, 6)),
    EngineName.DELTA_SPARK: ((4, 4, 0), (4, 4, 0)),
    EngineName.DATABRICKS: ((13, 3), None),
}


def _padded(version: tuple[int, ...]) -> tuple[int, ...]:
    return (*version, 0, 0, 0)[: max(3, len(version))]


#: How a release's version is spelled: dotted numbers for deltalake and delta-spark; a runtime's
#: ``major.minor``, optionally as a cluster's ``spark_version`` (``14.3.x-scala2.12``,
#: ``15.4.x-photon-scala2.12``) or with ``LTS``, for Databricks. Anything else -- a release candidate
#: (``1.6.6rc1``), a post-release (``1.6.6-1``), a local or snapshot build (``1.6.6+local``,
#: ``4.4.0-SNAPSHOT``, ``14.3.x-snapshot-scala2.12``) -- is not the release that was measured, although its
#: leading numbers are.
_RELEASE: Mapping[EngineName, re.Pattern[str]] = {
    EngineName.DELTA_RS: re.compile(r"\d+(?:\.\d+)*"),
    EngineName.DELTA_SPARK: re.compile(r"\d+(?:\.\d+)*"),
    EngineName.DATABRICKS: re.compile(r"\d+\.\d+(?:\.x-(?:[a-z0-9]+-)*scala\d+\.\d+| LTS)?", re.IGNORECASE),
}


def is_measured(profile: EngineProfile) -> bool:
    """Whether the profile's version is a release (:data:`_RELEASE`) in :data:`MEASURED_VERSIONS` for its
    engine.

    :param profile: the engine profile.
    """
    text = profile.version.strip()
    if not _RELEASE[profile.name].fullmatch(text) or "snapshot" in text.lower():
        return False
    low, high = MEASURED_VERSIONS[profile.name]
    version = _padded(profile.version_tuple)
    return (low is None or version >= _padded(low)) and (high is None or version <= _padded(high))


def version_caveat(profile: EngineProfile) -> str | None:
    """Why ``profile`` is judged by the strictest profile of its family (``None``: its version was measured).

    :param profile: the engine profile.
    """
    if is_measured(profile):
        return None
    low, high = MEASURED_VERSIONS[profile.name]
    if low is not None and low == high:
        covered = _version_text(low)
    else:
        low_text = _version_text(low) if low is not None else "any"
        covered = f"{low_text} and above" if high is None else f"{low_text} to {_version_text(high)}"
    how = "documented by the page" if profile.name is EngineName.DATABRICKS else "measured"
    return (
        f"{profile.describe()} was never {how} (only {covered}), so it is judged by the strictest "
        f"{profile.name.value} profile"
    )


def _version_text(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


# -------------------------------------------------------------------------------------- functions and types

#: Functions known to be deterministic (Spark does not mark them ``Nondeterministic``), by sqlglot key or
#: Spark name, lower-case. Every other function -- ``reflect``, ``java_method``, ``try_reflect``, a UDF, a
#: function that reads the clock or the input file -- is treated as non-deterministic.
DETERMINISTIC_FUNCTIONS: frozenset[str] = frozenset(
    {
        # connectives and conditionals (sqlglot parses them as functions)
        "and", "or", "not", "xor", "if", "case", "coalesce", "nullif", "nvl", "nvl2", "ifnull",
        "greatest", "least",
        # casts
        "cast", "trycast", "try_cast",
        # strings
        "lower", "upper", "lcase", "ucase", "length", "char_length", "character_length", "octet_length",
        "trim", "ltrim", "rtrim", "btrim", "concat", "concatws", "concat_ws", "substring", "substr", "left",
        "right", "pad", "lpad", "rpad", "initcap", "reverse", "repeat", "replace", "translate", "startswith",
        "starts_with", "endswith", "ends_with", "contains", "strposition", "instr", "locate", "position",
        "regexplike", "regexp_like", "rlike", "regexpextract", "regexp_extract", "regexpreplace",
        "regexp_replace", "ascii", "chr", "char", "hex", "unhex", "md5", "sha", "sha1", "sha2", "crc32",
        "hash", "xxhash64", "levenshtein", "soundex", "format_number", "split_part", "jsonformat", "to_json",
        # numbers
        "abs", "round", "bround", "floor", "ceil", "ceiling", "sign", "signum", "mod", "pmod", "pow", "power",
        "sqrt", "exp", "ln", "log", "log10", "log2", "isnan", "isnull", "isnotnull", "conv", "div",
        # dates and times (evaluated in the session's zone, which ADR 0001 handles; deterministic)
        "year", "month", "day", "dayofmonth", "dayofweek", "dayofyear", "weekday", "weekofyear", "quarter",
        "hour", "minute", "second", "extract", "date_part", "datepart", "todate", "to_date", "tsordstodate",
        "timestrtotime", "strtotime", "strtodate", "timetostr", "date_format", "dateformat", "to_timestamp",
        "tsordsadd", "dateadd", "date_add", "datesub", "date_sub", "datediff", "date_diff", "datetrunc",
        "date_trunc", "timestamptrunc", "trunc", "lastday", "last_day", "monthsbetween", "months_between",
        "next_day", "make_date", "make_timestamp", "unix_date", "date_from_unix_date", "unixtotime",
        "from_unixtime", "timetounix", "to_unix_timestamp", "from_utc_timestamp", "to_utc_timestamp",
    }
)  # fmt: skip


def function_name(node: exp.Func) -> str:
    """A function's name as the model shows it (its Spark name for a function sqlglot does not know)."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.key.lower()


def is_deterministic(node: exp.Func) -> bool:
    """Whether the function is known to be deterministic (:data:`DETERMINISTIC_FUNCTIONS`); ``False`` for
    any function the model does not know.

    :param node: a function of a parsed condition.
    """
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower() in DETERMINISTIC_FUNCTIONS
    names = (node.key.lower(), *(name.lower() for name in node.sql_names()))
    return any(name in DETERMINISTIC_FUNCTIONS for name in names)


#: Delta types a condition may compare without making it a condition on a complex type.
_COMPLEX = "complex"


def untyped_columns(table: TableConfig, columns: Collection[str]) -> tuple[str, ...]:
    """The columns among ``columns`` whose type is complex (struct, array, map) or not known, each with why.

    :param table: the table (its ``column_types``).
    :param columns: column names a condition uses (any case).
    """
    problems: list[str] = []
    for column in sorted({c.lower() for c in columns}):
        kind = table.column_type(column)
        if kind is None:
            problems.append(f"column {column} of unknown type")
        elif kind == _COMPLEX or kind.startswith(("struct", "array", "map")):
            problems.append(f"column {column} of a complex type")
    return tuple(problems)
