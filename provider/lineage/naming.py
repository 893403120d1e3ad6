"""How a Delta table's location is named: as an OpenLineage dataset and as an Airflow asset URI.

Pure (stdlib only), so the rules can be tested without Airflow or OpenLineage installed.

OpenLineage's dataset naming spec (``spec/Naming.md`` of OpenLineage/OpenLineage, "Object Storage" and
"Local file system") names a location by ``namespace = scheme://authority`` and ``name = path``:

=================  ==================================================  =======================
storage            namespace                                           name
=================  ==================================================  =======================
local file         ``file``                                            ``/abs/path``
S3                 ``s3://{bucket}``                                   ``{key}`` (no leading /)
GCS                ``gs://{bucket}``                                   ``{path}``
ABFSS / ABFS       ``abfss://{container}@{account}.dfs.core.windows.net``  ``{path}``
HDFS               ``hdfs://{namenode}:{port}``                        ``{path}``
=================  ==================================================  =======================

These agree with the converters Airflow's own providers register for their assets (common.io
``file``, amazon ``s3``, google ``gs``), so a deltaguard write and, say, an ``S3CreateObjectOperator`` on the
same location meet in one lineage node.

The asset URI of a table is its storage URI in the spelling those providers create: ``file:///abs/path``,
``s3://bucket/key``, ``gs://bucket/path``, ``abfss://container@account.dfs.core.windows.net/path``; one
spelling per table (``s3a://`` is ``s3://``, ``gcs://`` is ``gs://``, no trailing slash), so every
spelling of one table's URI schedules the same downstream DAGs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from deltaguard.core.locations import normalise_location

#: schemes spelled another way by the providers that own the storage (Hadoop's S3 connectors; object_store's
#: ``gcs``) -> the spelling of the OpenLineage spec and of the amazon and google providers' assets
_SCHEME_ALIASES: dict[str, str] = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}
#: object_store's short Azure forms ``az://container/path`` / ``azure://container/path`` / ``adl://``:
#: the account comes from the storage options
_AZURE_SHORT = frozenset({"az", "azure", "adl"})
#: storage-option keys object_store (delta-rs) reads the Azure account name from
_AZURE_ACCOUNT_KEYS = ("azure_storage_account_name", "account_name", "AZURE_STORAGE_ACCOUNT_NAME")
#: a ``delta+`` prefix on a source URI forces the Delta reader (:mod:`deltaguard.engines.sources`)
_DELTA_PREFIX = "delta+"


@dataclass(frozen=True)
class DatasetName:
    """An OpenLineage dataset's identity.

    :param namespace: the data source (``s3://bucket``, ``file``).
    :param name: the dataset within it (``warehouse/sales``, ``/data/sales``).
    """

    namespace: str
    name: str


def canonical_uri(location: str, storage_options: Mapping[str, str] | None = None) -> str:
    """One ``scheme://authority/path`` spelling of a table location (also the table's asset URI).

    :param location: an absolute path or a URI (``/data/t``, ``file:/data/t``, ``s3a://B/wh/t/``).
    :param storage_options: the table's storage options; only the Azure account name is read, to spell
        ``az://container/path`` as ``abfss://container@account.dfs.core.windows.net/path``.
    :raises ValueError: on a relative path or a URI without an authority where one is needed.
    """
    text = normalise_location(location)
    if text.startswith("/"):
        return "file://" + quote(text, safe="/")
    parts = urlsplit(text)
    scheme = _SCHEME_ALIASES.get(parts.scheme, parts.scheme)
    if not scheme:
        raise ValueError(f"table location {location!r} is neither an absolute path nor a URI")
    if scheme == "file":  # file://host/path (a remote host; normalise_location keeps it)
        return f"file://{parts.netloc}{parts.path}"
    if scheme in _AZURE_SHORT:
        account = next((str(v) for k, v in (storage_options or {}).items() if k in _AZURE_ACCOUNT_KEYS), "")
        if account and parts.netloc and "@" not in parts.netloc:
            return f"abfss://{parts.netloc}@{account.lower()}.dfs.core.windows.net{parts.path}"
    if not parts.netloc and scheme != "memory":
        raise ValueError(f"table location {location!r} has no bucket, container or host")
    return f"{scheme}://{parts.netloc}{parts.path}"


def dataset_name(location: str, storage_options: Mapping[str, str] | None = None) -> DatasetName:
    """The OpenLineage dataset naming a table or file location (see the module's table).

    :param location: an absolute path or a URI.
    :param storage_options: see :func:`canonical_uri`.
    """
    uri = canonical_uri(location, storage_options)
    parts = urlsplit(uri)
    if parts.scheme == "file":
        # the spec's local file system: namespace "file" (a remote host keeps it: file://host)
        return DatasetName(f"file://{parts.netloc}" if parts.netloc else "file", unquote(parts.path) or "/")
    return DatasetName(f"{parts.scheme}://{parts.netloc}", unquote(parts.path).lstrip("/"))


def source_location(source: object) -> str | None:
    """The location a write reads its rows from, when the source is one (a URI or path string).

    ``None`` for a callable, a DataFrame or anything else whose origin deltaguard cannot see: lineage then
    names no input rather than a wrong one.

    :param source: the operator's ``source`` (rendered).
    """
    if not isinstance(source, str) or not source.strip():
        return None
    text = source.strip()
    if text.lower().startswith(_DELTA_PREFIX):
        text = text[len(_DELTA_PREFIX) :]
    try:
        canonical_uri(text)
    except ValueError:
        return None
    return text
