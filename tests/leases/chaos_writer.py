"""One writer process of the chaos test (``tests/leases/test_chaos_writers.py``); not a test module.

Works through its jobs in order: for each, take the table's lease, write through delta-rs with the lease
keeper as commit fence and an app transaction per job, release, and record the job as done. Killed and
restarted, it resumes at its first job not recorded as done; a job whose commit landed before the kill is
then a no-op (its app transaction is in the log).

Usage: ``python chaos_writer.py STORE_URL TABLE WRITER JOBS_JSON PROGRESS_FILE``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path

import deltalake
import pyarrow as pa

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.errors import CommitFencedError, DeltaConflictError
from deltaguard.engines.specs import DeleteSpec, MergeSpec, OptimizeSpec, WriteContext, WriteSpec
from deltaguard.leases.keeper import LeaseKeeper, LeaseTiming
from deltaguard.leases.manager import LeaseError, LeaseManager
from deltaguard.leases.open import open_store, store_options
from deltaguard.leases.store import StoreError

TIMING = LeaseTiming(ttl_s=4.0, heartbeat_s=0.5, store_timeout_s=0.5, commit_margin_s=1.0)


def merge_rows(first: int, count: int) -> pa.Table:
    ids = list(range(first, first + count))
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"m{i}" for i in ids])})


#: seconds of work under the lease before the engine writes (an extract, a long scan), so that kills and
#: freezes land while leases are held and the writers queue behind each other
WORK_S = float(os.environ.get("CHAOS_WORK_S", "0.4"))


def job_spec(job: dict) -> WriteSpec:
    if job["kind"] == "merge":

        def extract() -> pa.Table:
            time.sleep(WORK_S)  # read by the engine inside the write, so the source-end fence follows it
            return merge_rows(job["first"], job["count"])

        return MergeSpec(extract, "t.id = s.id", not_matched_insert_all=True)
    if job["kind"] == "delete":
        return DeleteSpec(f"id >= {job['first']} AND id < {job['first'] + job['count']}")
    return OptimizeSpec()


def main(store_url: str, table: str, writer: str, jobs_path: str, progress_path: str) -> None:
    jobs = json.loads(Path(jobs_path).read_text())
    progress = Path(progress_path)
    done = set(progress.read_text().split()) if progress.exists() else set()
    events = Path(progress_path + ".events")

    def note(kind: str) -> None:
        # appended at once, so the figures survive a kill of this process
        with events.open("a") as out:
            out.write(kind + "\n")

    while True:  # the store may be held by a stopped lock holder just now: an Airflow try would retry
        try:
            manager = LeaseManager(open_store(store_url, **store_options(store_url, TIMING.store_timeout_s)))
            break
        except StoreError:
            note("store_error")
            time.sleep(0.1)
    engine = DeltaRsEngine()
    profile = EngineProfile(EngineName.DELTA_RS, deltalake.__version__)

    for job in jobs:
        if job["id"] in done:
            continue
        spec = job_spec(job)
        while True:
            request = LeaseRequest(
                claims=(TableClaim(table, spec.operation(), profile, TableConfig(exists=True, uri=table)),),
                owner=Owner(dag_id="chaos", task_id=writer, run_id=job["id"]),
                ttl_s=TIMING.ttl_s,
                wait_ttl_s=3.0,
                request_id=uuid.uuid4().hex,
            )
            try:
                answer = manager.acquire(request)
                while not isinstance(answer, Granted):
                    time.sleep(0.05)
                    answer = manager.acquire(request)
            except (StoreError, LeaseError):
                note("store_error")
                time.sleep(0.1)
                continue
            except Exception as exc:  # anything else is a finding: recorded whole, then asked again
                note("unexpected:" + repr(exc).replace("\n", " ").replace(" ", "_")[:300])
                time.sleep(0.1)
                continue
            keeper = LeaseKeeper(
                manager,
                answer.lease_id,
                request.owner,
                expires_at=answer.expires_at,
                fencing=answer.fencing,
                timing=TIMING,
            )
            context = WriteContext(
                app_id=f"chaos.{job['id']}",
                app_version=0,
                commit_metadata={
                    "lease_id": answer.lease_id,
                    "lease_fencing": json.dumps(dict(answer.fencing)),
                },
                fence=keeper,
            )
            try:
                with keeper:
                    if job["kind"] != "merge":
                        time.sleep(WORK_S)
                    result = engine.write(table, spec, context)
            except CommitFencedError:
                note("fenced")
                continue
            except DeltaConflictError:
                note("conflict")
                continue
            finally:
                try:
                    manager.release(answer.lease_id, request.owner)
                except Exception:  # the lease expires after its ttl
                    note("store_error")
            note("duplicate" if result.duplicate else "written")
            break
        with progress.open("a") as out:
            out.write(job["id"] + "\n")
            out.flush()
            os.fsync(out.fileno())
    manager.store.close()


if __name__ == "__main__":
    main(*sys.argv[1:6])
