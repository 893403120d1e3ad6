"""What makes an engine's commits to a table exclusive of other writers' commits.

Delta Lake's "Storage configuration" page: a log store needs *mutual exclusion* — only one writer may create
the commit file of a version. Where the storage itself refuses to create an existing file (HDFS' rename, a
conditional put on GCS, ADLS Gen2's rename without overwrite, delta-rs' put-if-absent), every writer is
excluded from every other, whichever engine it runs. Where it does not, the log store excludes only the
commits it sees itself:

- delta-spark's default for ``s3``/``s3a``/``s3n`` is ``S3SingleDriverLogStore``: "concurrent writes to the
  same Delta table from multiple Spark drivers can lead to data loss" (the page's S3 section);
- on local files delta-spark's ``HDFSLogStore`` checks that the commit file does not exist and then renames
  onto it, and a local rename replaces an existing file (``HDFSLogStore.java`` says so of
  ``RawLocalFileSystem``); its commit lock covers one JVM only;
- ``S3DynamoDBLogStore`` excludes the drivers that share its DynamoDB table, and nobody else (delta-rs 1.x
  no longer reads that table: delta-rs discussion 4482);
- Databricks on S3 commits through its own service, which writers outside the workspace do not use.

The result is a coordinator name; two writes may commit at once only when they name the same one (see
:func:`deltaguard.core.rules.common.commit_coordination_pair`). Names that identify one driver make
writes through different drivers run one at a time, and names made unique per engine (an unknown log store,
delta-rs with unsafe renames) make every write on the table run alone. Unknown means not coordinated.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping

from deltaguard.core.profiles import SINGLE_DRIVER_COORDINATION, STORAGE_COORDINATION

S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
#: schemes whose storage refuses to create an existing commit file for delta-spark's default log store
#: (HDFS rename; GCS preconditions in ``GCSLogStore``; ADLS Gen2 rename without overwrite)
_SPARK_EXCLUSIVE_SCHEMES = frozenset({"hdfs", "gs", "abfs", "abfss"})
#: the log stores that keep that exclusion (the defaults for those schemes)
_SPARK_STORAGE_LOG_STORES = frozenset(
    {
        "io.delta.storage.HDFSLogStore",
        "io.delta.storage.GCSLogStore",
        "io.delta.storage.AzureLogStore",
        "org.apache.spark.sql.delta.storage.HDFSLogStore",
        "org.apache.spark.sql.delta.storage.GCSLogStore",
        "org.apache.spark.sql.delta.storage.AzureLogStore",
    }
)
_DYNAMODB_LOG_STORE = "io.delta.storage.S3DynamoDBLogStore"
_DYNAMODB_TABLE_CONF = "spark.io.delta.storage.S3DynamoDBLogStore.ddb.tableName"
_DYNAMODB_REGION_CONF = "spark.io.delta.storage.S3DynamoDBLogStore.ddb.region"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def scheme_of(table_uri: str) -> str:
    """The URI scheme in lower case (``file`` for a plain path).

    :param table_uri: a table location.
    """
    match = _SCHEME.match(table_uri)
    if match is None or len(match.group(1)) == 1:  # no scheme, or a Windows drive letter
        return "file"
    return match.group(1).lower()


def single_driver(driver: str) -> str:
    """The coordinator of a log store that excludes only the commits of one driver.

    :param driver: what identifies the driver (a Spark application id, a Spark Connect URL).
    """
    return f"{SINGLE_DRIVER_COORDINATION}:{driver}"


def uncoordinated() -> str:
    """A coordinator nobody else shares: every other write on the table conflicts with this one."""
    return f"{SINGLE_DRIVER_COORDINATION}:unshared-{uuid.uuid4().hex}"


def deltars_coordination(table_uri: str, storage_options: Mapping[str, str] | None) -> str:
    """delta-rs: the storage's put-if-absent, unless S3 renames were declared unsafe.

    delta-rs 1.x commits with a put-if-absent on every object store (S3's conditional writes included) and
    a no-replace rename on local files. ``AWS_S3_ALLOW_UNSAFE_RENAME`` asks it to skip that guarantee.

    :param table_uri: the table location.
    :param storage_options: the delta-rs storage options the writes use.
    """
    if scheme_of(table_uri) in S3_SCHEMES:
        options = {k.lower(): str(v).strip().lower() for k, v in (storage_options or {}).items()}
        if options.get("aws_s3_allow_unsafe_rename") in ("true", "1", "yes"):
            return uncoordinated()
    return STORAGE_COORDINATION


def spark_coordination(
    table_uri: str, *, databricks: bool, conf: Callable[[str], str], driver: str | None
) -> str:
    """delta-spark or Databricks: from the location's scheme and the session's log store settings.

    :param table_uri: the table location (a catalog table's storage location).
    :param databricks: the session is a Databricks cluster.
    :param conf: reads a Spark setting (``""`` when unset).
    :param driver: the driver's identity (``spark.app.id``), or ``None`` when unknown.
    """
    scheme = scheme_of(table_uri)
    if databricks:
        return "databricks" if scheme in S3_SCHEMES else STORAGE_COORDINATION
    log_store = (
        conf(f"spark.delta.logStore.{scheme}.impl").strip() or conf("spark.delta.logStore.class").strip()
    )
    if log_store == _DYNAMODB_LOG_STORE:
        table = conf(_DYNAMODB_TABLE_CONF).strip() or "delta_log"
        region = conf(_DYNAMODB_REGION_CONF).strip() or "us-east-1"
        return f"dynamodb:{region}/{table}"
    if scheme in _SPARK_EXCLUSIVE_SCHEMES and (not log_store or log_store in _SPARK_STORAGE_LOG_STORES):
        return STORAGE_COORDINATION
    # S3's single-driver store, local files, Azure Blob (wasb: rename is copy and delete), any other
    # scheme or custom log store: exclusive within this driver at best.
    return single_driver(driver) if driver else uncoordinated()
