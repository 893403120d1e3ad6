"""Headless Debian Chromium, driven by Playwright, through the deltaguard UI of a running Airflow stack.

A visit has two halves around one lease release, so it rides on a stack that an end-to-end module runs
anyway (``tests/e2e/test_generated_home.py``: a write waiting behind another job's lease, then released):

* :meth:`UiVisit.while_waiting`: log in through Airflow's own login page, find the waiting task with its
  blocker and reason on the Tables page, open the table's matrix, the waiting task's Delta leases tab (light
  and dark) and its run's tab;
* :meth:`UiVisit.after_release`: once the writer that waited has finished, open its task-instance page in
  the Airflow UI and click its "Delta leases" extra link to its tab, which says it was granted after waiting.

Every view is the plugin's React app rendered by Airflow's own UI (no iframe). Screenshots go to ``out``;
with ``DELTAGUARD_UPDATE_SCREENSHOTS=1`` those in :data:`DOC_SCREENSHOTS` are also copied to
``docs/screenshots/`` (the Tables view's screenshots come from ``tests/ui/test_browser.py``).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.harness.airflow_runner import AirflowHome, AirflowStack, repo_root
from deltaguard.core.admission import Owner
from deltaguard.plugins import service
from deltaguard.plugins.reads import UiReader

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
T = TypeVar("T")
#: the screenshots kept in docs/screenshots/ (the README and docs/ui.md show them)
DOC_SCREENSHOTS = ("ui_ti_tab.png", "ui_ti_tab_dark.png", "ui_run_tab.png")
#: every screenshot a whole visit takes
SCREENSHOTS = ("ui_tables.png", "ui_table.png", "ui_ti_tab.png", "ui_ti_tab_dark.png", "ui_decision.png")


def poll(what: str, check: Callable[[], T | None], timeout: float, interval: float = 2.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def waiting_behind(reader: UiReader, holder: Owner) -> dict[str, Any] | None:
    """The UI's Tables answer for a task waiting behind ``holder`` with a reason, if there is one."""
    for table in service.tables(reader)["tables"]:
        for waiter in table["waiting"]:
            if any(b["owner"] == holder.describe() for b in waiter["blockers"]) and waiter["reasons"]:
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


class UiVisit:
    """One browser through both halves of a visit; a context manager (the browser closes on leaving).

    :param home: the running stack's home (base URL, admin password, logs).
    :param holder: the job whose lease the waiting task waits behind.
    :param out: where the screenshots (and, on a failure, each open page's HTML and picture) go.
    """

    def __init__(self, home: AirflowHome, holder: Owner, out: Path) -> None:
        self.home = home
        self.holder = holder
        self.out = out
        self._exit = ExitStack()
        self._browser: Any = None
        self._page: Any = None
        self._waiter: dict[str, Any] | None = None

    def __enter__(self) -> UiVisit:
        from playwright.sync_api import expect, sync_playwright

        self.out.mkdir(parents=True, exist_ok=True)
        pw = self._exit.enter_context(sync_playwright())
        self._browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        self._exit.callback(self._browser.close)
        expect.set_options(timeout=60_000)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._exit.close()

    def _save_pages(self) -> None:
        """Each open page's HTML and picture, to see what the browser saw when a step failed."""
        for i, open_page in enumerate(self._browser.contexts[0].pages if self._browser.contexts else []):
            (self.out / f"failure-{i}.html").write_text(open_page.content())
            open_page.screenshot(path=str(self.out / f"failure-{i}.png"))
        print(f"pages at failure saved in {self.out}")

    def while_waiting(self, dag_id: str, run_id: str, reader: UiReader) -> str:
        """The first half, while a task of the run waits behind the holder; return that task's id."""
        from playwright.sync_api import expect

        found = poll("a DAG write queued behind the holder", lambda: waiting_behind(reader, self.holder), 300)
        waiter = self._waiter = found["waiter"]
        blocker = self.holder.describe()
        try:
            page = self._page = self._browser.new_page(viewport={"width": 1360, "height": 900})
            page.set_default_timeout(60_000)
            page.goto(f"{self.home.base_url}/plugin/delta-leases")
            _login(page, self.home.admin_password())
            page.wait_for_url("**/plugin/delta-leases**", timeout=60_000)

            # Tables (Browse > Delta leases, rendered by Airflow): the waiting task and whom it waits behind
            card = page.locator("[data-testid=table-card]", has_text=found["table"]["name"]).first
            row = card.locator("[data-testid=waiter]", has_text=waiter["owner"]["describe"]).first
            expect(row).to_be_visible()
            expect(row).to_contain_text(f"behind {blocker}")
            # the queue's causes are said once per card, each with whom it holds back and why
            expect(card.locator("[data-testid=cause]", has_text=blocker).first).to_be_visible()
            expect(card.locator("[data-testid=why]").first).not_to_be_empty()
            assert page.locator("iframe").count() == 0
            _shot(page, self.out, "ui_tables.png")

            # Table view: the colour-coded matrix with reasons on hover
            card.get_by_role("link", name=found["table"]["name"]).first.click()
            page.wait_for_url("**/plugin/delta-leases?table=**")
            cell = page.locator("td[title*='[rule ']").first
            expect(cell).to_have_attribute("title", re.compile(r".+ x .+: .+\[rule .+\]"))
            _shot(page, self.out, "ui_table.png", full_page=True)

            # The waiting task instance's Delta leases tab, and its run's tab, while it still waits
            waiting_task = str(waiter["owner"]["task_id"])
            run_path = f"{self.home.base_url}/dags/{dag_id}/runs/{run_id}"
            page.goto(f"{run_path}/tasks/{waiting_task}/plugin/delta-leases-task")
            headline = page.locator("[data-testid=headline]")
            expect(headline).to_contain_text("waiting behind")
            expect(headline).to_contain_text(blocker)
            _shot(page, self.out, "ui_ti_tab.png")
            page.emulate_media(color_scheme="dark")
            expect(headline).to_contain_text(blocker)
            _shot(page, self.out, "ui_ti_tab_dark.png")
            page.emulate_media(color_scheme="light")
            page.goto(f"{run_path}/plugin/delta-leases-run")
            expect(page.locator("[data-testid=waiter]").first).to_contain_text(waiting_task)
            _shot(page, self.out, "ui_run_tab.png")
        except Exception:
            self._save_pages()
            raise
        return waiting_task

    def after_release(self, stack: AirflowStack, dag_id: str, run_id: str) -> None:
        """The second half, after the holder released: the writer that waited finishes, and its extra link
        in the Airflow UI opens its Delta leases tab, inside Airflow."""
        from playwright.sync_api import expect

        assert self._waiter is not None and self._page is not None, "while_waiting() comes first"
        page = self._page
        blocker = self.holder.describe()
        waited_task = str(self._waiter["owner"]["task_id"])
        try:
            state = poll(
                f"{waited_task} to finish",
                lambda: next(
                    (
                        t.state
                        for t in stack.task_instances(dag_id, run_id)
                        if t.task_id == waited_task and t.state in ("success", "failed", "upstream_failed")
                    ),
                    None,
                ),
                300,
            )
            assert state == "success", f"{waited_task} ended {state}; see {self.home.log_dir}"
            page.goto(f"{self.home.base_url}/dags/{dag_id}/runs/{run_id}/tasks/{waited_task}")
            # Airflow 3.3 lists a finished task's extra links on the task instance's Details tab
            page.get_by_role("tab", name="Details").or_(page.get_by_text("Details", exact=True)).first.click()
            link = page.get_by_role("link", name="Delta leases", exact=True)
            link.first.wait_for(timeout=90_000)
            assert "/plugin/delta-leases-task" in (link.first.get_attribute("href") or "")
            link.first.click()  # Airflow may open extra links in a new tab
            decision = poll(
                "the task's Delta leases tab",
                lambda: next((p for p in page.context.pages if "/plugin/delta-leases-task" in p.url), None),
                60,
                1.0,
            )
            decision.wait_for_load_state()
            expect(decision.locator("[data-testid=headline]")).to_contain_text("granted after waiting")
            expect(decision.locator("[data-testid=headline]")).to_contain_text(blocker)
            expect(decision.locator("[data-testid=blocker]").first).to_contain_text(blocker)
            _shot(decision, self.out, "ui_decision.png", full_page=True)
        except Exception:
            self._save_pages()
            raise
