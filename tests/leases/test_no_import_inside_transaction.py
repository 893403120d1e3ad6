"""A process's first decision imports nothing while a lease store transaction is open.

A task's process decides once. Whatever the conflict model imports on its first use is imported during that
decision, and on SQLite the store's one write lock is held meanwhile: sqlglot's Spark dialect alone took
about 0.1 s (``benchmarks/bench_lock_hold.py``; a cold decision's transaction went from about 116 ms to
20 ms once it was imported with the predicate parser).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_HOLD = """
from tests.leases.conftest import ask_int_delete
from deltaguard.leases.manager import LeaseManager
manager = LeaseManager({url!r})
for k in (1, 2):
    ask_int_delete(manager, f"holder{{k}}", f"k = {{k}}")
"""

# the decision of a new process, beside the holders; every module imported inside a store transaction is
# recorded by an audit hook
_DECIDE = """
import json, sys
from deltaguard.leases.sql.base import SqlLeaseStore
open_transactions, imported = [0], []

def audit(event, args):
    if event == "import" and open_transactions[0]:
        imported.append(args[0])

sys.addaudithook(audit)
run = SqlLeaseStore.run

def counted(self, *args, **kwargs):
    open_transactions[0] += 1
    try:
        return run(self, *args, **kwargs)
    finally:
        open_transactions[0] -= 1

SqlLeaseStore.run = counted
from tests.leases.conftest import ask_int_delete
from deltaguard.leases.manager import LeaseManager
answer = ask_int_delete(LeaseManager({url!r}), "asker", "k = 3 OR k = 4")
print(json.dumps({{"status": answer.status, "imported": sorted(set(imported))}}))
"""


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_new_process_decides_without_importing_inside_the_transaction(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/leases.db"
    _python(_HOLD.format(url=url))
    seen = json.loads(_python(_DECIDE.format(url=url)).strip().splitlines()[-1])
    # beside two holders of other partitions the decision ran the model (and the engine's evaluator)
    assert seen["status"] == "granted"
    assert seen["imported"] == []
