"""A Spark write target: a path-based Delta table or a catalog table name, and how SQL names it."""

from __future__ import annotations

import os
from dataclasses import dataclass

from deltaguard.engines.errors import InvalidWriteError


def _is_path(uri: str) -> bool:
    # Catalog names are dotted identifiers; anything with a scheme or a path separator is a location.
    return "://" in uri or uri.startswith(("/", ".", "~", "file:")) or os.sep in uri or "/" in uri


def _quote_identifier(part: str) -> str:
    return "`" + part.replace("`", "``") + "`"


@dataclass(frozen=True)
class SparkTarget:
    """Where a Spark write goes.

    :param uri: the table URI as the user gave it.
    :param path: the location for path-based tables (``DeltaTable.forPath``), else ``None``.
    :param name: the catalog name (``catalog.schema.table``) for ``DeltaTable.forName``, else ``None``.
    """

    uri: str
    path: str | None = None
    name: str | None = None

    @classmethod
    def parse(cls, uri: str) -> SparkTarget:
        """A path (``/data/t``, ``s3a://b/t``, ``file:///t``) or a catalog name (``main.sales.orders``).

        :raises InvalidWriteError: for an empty URI or a malformed name.
        """
        text = uri.strip()
        if not text:
            raise InvalidWriteError("empty table URI")
        if _is_path(text):
            return cls(uri=uri, path=os.path.expanduser(text) if text.startswith("~") else text)
        if text.startswith("`") or "`" in text:
            return cls(uri=uri, name=text)  # already quoted by the user: keep as written
        parts = text.split(".")
        if not all(p.strip() for p in parts):
            raise InvalidWriteError(f"malformed table name {uri!r}")
        return cls(uri=uri, name=text)

    def sql_reference(self) -> str:
        """How Spark SQL names the table: ``delta.`/path``` or ```catalog`.`schema`.`table```."""
        if self.path is not None:
            return "delta." + _quote_identifier(self.path)
        assert self.name is not None
        if "`" in self.name:
            return self.name
        return ".".join(_quote_identifier(p.strip()) for p in self.name.split("."))
