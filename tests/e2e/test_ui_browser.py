"""End to end in a browser: the deltaguard UI inside a real Airflow, with the example pipeline mid-run.

A real stack (:mod:`benchmarks.harness.airflow_runner`) runs the example DAG. Before the run starts, the test takes
a lease on the ``customers`` table for a MERGE of another (fictitious) job through the real lease manager on
the stack's lease store, so the DAG's ``customers`` writers must queue behind it, whatever the timing of
task start-up on a busy machine. Headless Debian Chromium, driven by Playwright, logs in through Airflow's
own login page, finds a waiting task with its blocker and reason on the Tables page, opens the table's
matrix; then the test releases the lease, and once a writer that waited has finished, the browser goes to
its task-instance page in the Airflow UI and clicks its "Delta leases" extra link to its Delta leases tab.
Every view is the plugin's React app rendered by Airflow's own UI (no iframe).

Screenshots go to the test's temporary directory; with ``DELTAGUARD_UPDATE_SCREENSHOTS=1`` they are also
copied to ``docs/screenshots/`` (the task-instance tab in light and dark mode, which the docs show; the
Tables view's screenshots come from ``tests/ui/test_browser.py``).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from benchmarks.demo import DELTAGUARD_DAG, create_pools, example_tables
from benchmarks.harness.airflow_runner import AirflowStack, default_dags_folder, prepare_home, repo_root
from deltaguard.core.admission import Owner
from deltaguard.leases.manager import LeaseManager
from deltaguard.plugins import service
from deltaguard.plugins.reads import UiReader
from tests.e2e.shared import hold_customers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DAY = "2026-11-21"
WRITE_SECONDS = 5
#: the job holding ``customers`` when the run starts
HOLDER = Owner(dag_id="customers_backfill", run_id="manual__e2e", task_id="rewrite_customers", try_number=1)
T = TypeVar("T")
#: the screenshots kept in docs/screenshots/ (the README and docs/ui.md show them)
DOC_SCREENSHOTS = ("ui_ti_tab.png", "ui_ti_tab_dark.png", "ui_run_tab.png")


def _poll(what: str, check: Callable[[], T | None], timeout: float, interval: float = 2.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def _waiting_behind_holder(reader: UiReader) -> dict[str, Any] | None:
    for table in service.tables(reader)["tables"]:
        for waiter in table["waiting"]:
            if any(b["owner"] == HOLDER.describe() for b in waiter["blockers"]) and waiter["reasons"]:
                return {"table": table, "waiter": waiter}
    return None


def _shot(page: Any, out: Path, name: str, **options: Any) -> Path:
    path = out / name
    page.screenshot(path=str(path), **options)
    if os.environ.get("DELTAGUARD_UPDATE_SCREENSHOTS") == "1" and name in DOC_SCREENSHOTS:
        docs = repo_root() / "docs" / "screenshots"
        docs.mkdir(parents=True, exist_ok=True)
        # 64 colours keep the committed PNGs small (the pages are flat colours and text)
        from PIL import Image

        with Image.open(path) as image:
            image.convert("RGB").quantize(colors=64).save(docs / name, optimize=True)
    return path


def _login(page: Any, password: str) -> None:
    """Airflow's simple-auth-manager login form (a React page): user name, password, submit."""
    page.wait_for_selector("input[type=password]", timeout=60_000)
    page.locator("input:not([type=password])").first.fill("admin")
    page.locator("input[type=password]").fill(password)
    page.locator("button[type=submit]").click()


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt install chromium)")
def test_ui_in_a_browser_mid_run(tmp_path: Path) -> None:
    out = tmp_path / "screenshots"
    out.mkdir()
    home = prepare_home(
        tmp_path / "airflow_home",
        default_dags_folder(),
        parallelism=8,
        data_dir=tmp_path / "data",
        # provider plugins are only loaded when providers are discovered eagerly
        options={"core": {"lazy_discover_providers": "False"}},
        extra_env={
            "DELTAGUARD_EXAMPLE_WRITE_SECONDS": str(WRITE_SECONDS),
            "DELTAGUARD_EXAMPLE_SCHEDULE": "none",
        },
    )
    with AirflowStack(home) as stack:
        create_pools(stack)
        stack.wait_for_dag(DELTAGUARD_DAG)
        manager = LeaseManager(home.lease_store_url)
        try:
            hold_customers(manager, example_tables(home, "deltaguard")["customers"], HOLDER, "e2e-holder")
            run_id = stack.trigger(DELTAGUARD_DAG, {"date": DAY})
            reader = UiReader(manager.store)
            found = _poll("a DAG write queued behind the holder", lambda: _waiting_behind_holder(reader), 300)
            _browse(stack, home, run_id, found, out, manager)
        finally:
            manager.store.close()
    for name in ("ui_tables.png", "ui_table.png", "ui_ti_tab.png", "ui_ti_tab_dark.png", "ui_decision.png"):
        assert (out / name).stat().st_size > 10_000, name


def _browse(
    stack: AirflowStack, home: Any, run_id: str, found: dict[str, Any], out: Path, manager: LeaseManager
) -> None:
    """Drive Chromium through the pages; releases the holder's lease half-way."""
    from playwright.sync_api import expect, sync_playwright

    waiter = found["waiter"]
    blocker = HOLDER.describe()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            from playwright.sync_api import expect as _expect

            _expect.set_options(timeout=60_000)
            page = browser.new_page(viewport={"width": 1360, "height": 900})
            page.set_default_timeout(60_000)
            page.goto(f"{home.base_url}/plugin/delta-leases")
            _login(page, home.admin_password())
            page.wait_for_url("**/plugin/delta-leases**", timeout=60_000)

            # Tables (Browse > Delta leases, rendered by Airflow): the waiting task and whom it waits behind
            card = page.locator("[data-testid=table-card]", has_text=found["table"]["name"]).first
            row = card.locator("[data-testid=waiter]", has_text=waiter["owner"]["describe"]).first
            expect(row).to_be_visible()
            expect(row.locator("[data-testid=blocker]").first).to_contain_text(blocker)
            expect(row.locator("[data-testid=why]").first).not_to_be_empty()
            assert page.locator("iframe").count() == 0
            _shot(page, out, "ui_tables.png")

            # Table view: the colour-coded matrix with reasons on hover
            card.get_by_role("link", name=found["table"]["name"]).first.click()
            page.wait_for_url("**/plugin/delta-leases?table=**")
            cell = page.locator("td[title*='[rule ']").first
            expect(cell).to_have_attribute("title", re.compile(r".+ x .+: .+\[rule .+\]"))
            _shot(page, out, "ui_table.png", full_page=True)

            # The waiting task instance's Delta leases tab, and its run's tab, while it still waits
            waiting_task = waiter["owner"]["task_id"]
            run_path = f"{home.base_url}/dags/{DELTAGUARD_DAG}/runs/{run_id}"
            page.goto(f"{run_path}/tasks/{waiting_task}/plugin/delta-leases-task")
            headline = page.locator("[data-testid=headline]")
            expect(headline).to_contain_text("waiting behind")
            expect(headline).to_contain_text(blocker)
            _shot(page, out, "ui_ti_tab.png")
            page.emulate_media(color_scheme="dark")
            expect(headline).to_contain_text(blocker)
            _shot(page, out, "ui_ti_tab_dark.png")
            page.emulate_media(color_scheme="light")
            page.goto(f"{run_path}/plugin/delta-leases-run")
            expect(page.locator("[data-testid=waiter]").first).to_contain_text(waiting_task)
            _shot(page, out, "ui_run_tab.png")

            # The holder finishes; a writer that waited behind it finishes too, and its extra link
            # in the Airflow UI opens its Delta leases tab, inside Airflow.
            assert manager.release("e2e-holder", HOLDER)
            waited_task = waiter["owner"]["task_id"]
            state = _poll(
                f"{waited_task} to finish",
                lambda: next(
                    (
                        t.state
                        for t in stack.task_instances(DELTAGUARD_DAG, run_id)
                        if t.task_id == waited_task and t.state in ("success", "failed", "upstream_failed")
                    ),
                    None,
                ),
                300,
            )
            assert state == "success", f"{waited_task} ended {state}; see {home.log_dir}"
            page.goto(f"{run_path}/tasks/{waited_task}")
            # Airflow 3.3 lists a finished task's extra links on the task instance's Details tab
            page.get_by_role("tab", name="Details").or_(page.get_by_text("Details", exact=True)).first.click()
            link = page.get_by_role("link", name="Delta leases", exact=True)
            link.first.wait_for(timeout=90_000)
            assert "/plugin/delta-leases-task" in (link.first.get_attribute("href") or "")
            link.first.click()  # Airflow may open extra links in a new tab
            decision = _poll(
                "the task's Delta leases tab",
                lambda: next((p for p in page.context.pages if "/plugin/delta-leases-task" in p.url), None),
                60,
                1.0,
            )
            decision.wait_for_load_state()
            expect(decision.locator("[data-testid=headline]")).to_contain_text("granted after waiting")
            expect(decision.locator("[data-testid=headline]")).to_contain_text(blocker)
            expect(decision.locator("[data-testid=blocker]").first).to_contain_text(blocker)
            _shot(decision, out, "ui_decision.png", full_page=True)
        except Exception:
            for i, open_page in enumerate(browser.contexts[0].pages if browser.contexts else []):
                (out / f"failure-{i}.html").write_text(open_page.content())
                open_page.screenshot(path=str(out / f"failure-{i}.png"))
            print(f"pages at failure saved in {out}")
            raise
        finally:
            browser.close()
