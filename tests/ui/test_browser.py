"""The Delta leases React app inside Airflow's own UI, in headless Debian Chromium (Playwright).

The real api-server app (Airflow's UI and API, the plugin) is served by uvicorn over the scenario's lease
store; the browser carries a token from Airflow's ``POST /auth/token`` as the UI's ``_token`` cookie. The
checks are what a user sees: the app renders under Airflow's plugin route (Airflow's navigation around it,
no iframe, no header of its own), it follows Airflow's colour mode, its links use Airflow's brand token, and
a waiting task names the task it waits for, why in one line, and what to change, with the model's full
reason one click away.

``DELTAGUARD_UPDATE_SCREENSHOTS=1`` copies the screenshots to ``docs/screenshots/`` (64 colours).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deltaguard.core.remedies import explain_pair
from tests.ui.airflow_app import PASSWORDS, REPO, build_app, register_dag
from tests.ui.live_server import serve
from tests.ui.scenario import (
    CUSTOMERS,
    CUSTOMERS_CONFIG,
    EVENTS,
    MERGE,
    PROFILE,
    RUN,
    add_queue_jump,
    build,
    owner,
)

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt install chromium)"),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    import httpx

    tmp = tmp_path_factory.mktemp("browser")
    saved = dict(os.environ)
    scenario = build(tmp)
    add_queue_jump(scenario.manager, scenario.clock)  # a table whose writes state durations, and a jump
    try:
        app = build_app(scenario.url)
        register_dag(REPO / "dags_examples" / "deltaguard_daily_sales.py")
        with serve(app) as base:
            answer = httpx.post(
                f"{base}/auth/token", json={"username": "admin", "password": PASSWORDS["admin"]}
            )
            yield {"base": base, "token": answer.json()["access_token"], "out": tmp, "scenario": scenario}
    finally:
        scenario.manager.store.close()
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        yield chromium
        chromium.close()


@pytest.fixture(autouse=True)
def _patient_expect() -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=120_000)  # a busy machine renders Airflow's UI slowly


def _page(browser: Any, site: dict[str, Any], scheme: str) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
    context.add_cookies([{"name": "_token", "value": site["token"], "url": site["base"]}])
    page = context.new_page()
    page.set_default_timeout(120_000)
    return page


def _open(page: Any, url: str) -> None:
    # Airflow's UI loads large bundles (its editor among them): wait for the app's own elements, not "load"
    page.goto(url, wait_until="commit")


def _shot(page: Any, site: dict[str, Any], name: str, **options: Any) -> None:
    path = site["out"] / name
    page.screenshot(path=str(path), **options)
    if os.environ.get("DELTAGUARD_UPDATE_SCREENSHOTS") == "1":
        from PIL import Image

        with Image.open(path) as image:  # 64 colours keep the committed PNGs small
            image.convert("RGB").quantize(colors=64).save(REPO / "docs" / "screenshots" / name, optimize=True)


def _luminance(css_colour: str) -> float:
    parts = css_colour[css_colour.index("(") + 1 : css_colour.index(")")].replace(",", " ").split()
    r, g, b = (float(p) for p in parts[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _card_background(page: Any) -> str:
    return str(
        page.locator("[data-testid=table-card]").first.evaluate("e => getComputedStyle(e).backgroundColor")
    )


def test_tables_render_inside_airflow_and_name_the_blocking_task(browser: Any, site: dict[str, Any]) -> None:
    from playwright.sync_api import expect

    page = _page(browser, site, "light")
    _open(page, f"{site['base']}/plugin/delta-leases")
    page.locator("[data-testid=cause]").first.wait_for()  # Airflow's UI, then the plugin bundle, load
    card = page.locator("[data-testid=table-card]", has_text="customers").first
    waiter = card.locator("[data-testid=waiter]", has_text="daily_sales.merge_b").first
    expect(waiter).to_contain_text("behind daily_sales.merge_a")
    # the operation is the write's kind; the operator's app id is on hover only
    operation = waiter.locator("[data-testid=operation]")
    expect(operation).to_have_text("MERGE (t.id = s.id)")
    assert "daily_sales/merge_b" in (operation.get_attribute("title") or "")
    expect(card.locator("[data-testid=lease] [data-testid=operation]")).to_have_text("MERGE (t.id = s.id)")
    # each cause once, for every write it holds back
    expected = explain_pair(MERGE, MERGE, CUSTOMERS_CONFIG, PROFILE)
    whys = card.locator("[data-testid=cause] [data-testid=why]").all_inner_texts()
    assert len(whys) == len(set(whys)) == 2 and expected.why in whys, whys
    cause = card.locator("[data-testid=cause]", has_text=expected.why).first
    expect(cause.locator("[data-testid=cause-who]")).to_contain_text(
        "holds back daily_sales.merge_b behind daily_sales.merge_a"
    )
    expect(cause.locator("[data-testid=changes]")).to_contain_text(expected.changes[0].text)
    # each wait says when it is expected to end (no durations in this store: "no estimate", on hover why)
    expect(card.locator("[data-testid=waiter] [data-testid=eta]")).to_have_count(2)
    # the long reason is one click away, not on the page
    expect(cause.locator("[data-testid=reason]")).to_have_count(0)
    cause.locator("[data-testid=reason-toggle]").click()
    expect(cause.locator("[data-testid=reason]")).to_contain_text(expected.reason[:60])
    # the blocking task links to its own Delta leases tab inside Airflow (a router link, no new site)
    href = cause.locator("[data-testid=task-link]", has_text="merge_a").first.get_attribute("href") or ""
    assert href == f"/dags/daily_sales/runs/{RUN}/tasks/merge_a/plugin/delta-leases-task"
    # Airflow's page around it: its navigation, no iframe, no header of the plugin's own
    assert (
        page.locator("iframe").count() == 0 and page.locator("header b", has_text="deltaguard").count() == 0
    )
    expect(
        page.get_by_role("link", name="Browse").or_(page.get_by_role("button", name="Browse")).first
    ).to_be_visible()
    expect(page.locator("[data-testid=title]")).to_have_text("Delta leases")
    # links take Airflow's brand token (the theme an [api] theme changes), not a colour of the plugin's own
    colours = cause.locator("[data-testid=task-link]").first.evaluate(
        """e => { const probe = document.createElement('span');
                  probe.style.color = 'var(--chakra-colors-brand-fg)'; document.body.appendChild(probe);
                  const want = getComputedStyle(probe).color; probe.remove();
                  return [getComputedStyle(e).color, want]; }"""
    )
    assert colours[0] == colours[1], colours
    # on orders every write states its duration: each wait has an expected start, and the jump is explained
    orders = page.locator("[data-testid=table-card]", has_text="orders").first
    second = orders.locator("[data-testid=waiter]", has_text="orders_second")
    expect(second.locator("[data-testid=eta]")).to_contain_text("starts in ~")
    jump = second.locator("[data-testid=overtaken]")
    expect(jump).to_contain_text("moved from position 2 to 4: ")
    expect(jump).to_contain_text("daily_sales.orders_urgent_a asked")
    expect(second.locator("[data-testid=overtaken]")).to_contain_text("priority 50 against 0")
    expect(orders.locator("[data-testid=lease-eta]")).to_contain_text("in ~")
    _shot(page, site, "ui_tables.png")
    orders.scroll_into_view_if_needed()
    _shot(page, site, "ui_queue_jump.png")
    page.context.close()


def test_home_panel_is_one_line_above_airflows_dashboard(browser: Any, site: dict[str, Any]) -> None:
    from playwright.sync_api import expect

    for scheme in ("light", "dark"):
        page = _page(browser, site, scheme)
        _open(page, f"{site['base']}/")
        panel = page.locator("[data-testid=home-panel]")
        expect(panel).to_contain_text("6 waiting")  # 2 on customers, 4 on orders
        box = panel.bounding_box()
        assert box is not None and box["height"] <= 48, box
        _shot(page, site, f"ui_home{'_dark' if scheme == 'dark' else ''}.png")
        page.context.close()


def test_dark_mode_follows_airflow(browser: Any, site: dict[str, Any]) -> None:
    backgrounds = {}
    for scheme in ("light", "dark"):
        page = _page(browser, site, scheme)
        _open(page, f"{site['base']}/plugin/delta-leases")
        page.locator("[data-testid=cause]").first.wait_for()
        backgrounds[scheme] = _card_background(page)
        if scheme == "dark":
            _shot(page, site, "ui_tables_dark.png")
        page.context.close()
    assert _luminance(backgrounds["light"]) > 200 and _luminance(backgrounds["dark"]) < 60, backgrounds


def test_table_view_with_the_models_matrix(browser: Any, site: dict[str, Any]) -> None:
    from playwright.sync_api import expect

    page = _page(browser, site, "dark")
    _open(page, f"{site['base']}/plugin/delta-leases")
    page.locator(
        "[data-testid=table-card] h2 a, [data-testid=table-card] a", has_text="customers"
    ).first.click()
    page.wait_for_url("**/plugin/delta-leases?table=*")
    assert CUSTOMERS in page.url.replace("%3A", ":").replace("%2F", "/")
    cell = page.locator("td[title*='[rule ']").first
    expect(cell).to_be_visible()
    # the timeline of the table's writes: merge_a writing, merge_b and the OPTIMIZE waiting
    rows = page.locator("[data-testid=timeline] [data-testid=timeline-row]")
    expect(rows).to_have_count(3)
    expect(rows.filter(has_text="merge_a").locator("[data-kind=writing]")).to_have_count(1)
    expect(rows.filter(has_text="merge_b").locator("[data-kind=waiting]")).to_have_count(1)
    page.get_by_role("heading", name="Timeline").scroll_into_view_if_needed()
    _shot(page, site, "ui_table_timeline.png")
    page.get_by_role("heading", name="Conflict matrix").scroll_into_view_if_needed()
    _shot(page, site, "ui_table.png")
    page.context.close()


def test_table_view_flags_a_write_possibly_outside_its_lease(browser: Any, site: dict[str, Any]) -> None:
    """An ``unfenced_overrun`` entry puts a red card above the table's view, naming the write and why."""
    from urllib.parse import quote

    from playwright.sync_api import expect

    page = _page(browser, site, "light")
    _open(page, f"{site['base']}/plugin/delta-leases?table={quote(EVENTS, safe='')}")
    expect(page.get_by_role("heading", name="Timeline")).to_be_visible()
    expect(page.locator("[data-testid=overruns]")).to_have_count(0)
    reason = "the wrapped work ended after its lease was lost"
    site["scenario"].manager.record_overrun("r-late", owner("append_late"), [EVENTS], {"reason": reason})
    page.reload(wait_until="commit")
    card = page.locator("[data-testid=overruns]")
    expect(card).to_contain_text("Possibly written outside a lease")
    expect(card).to_contain_text("append_late")
    expect(card).to_contain_text(reason)
    page.context.close()


def test_task_instance_and_run_tabs(browser: Any, site: dict[str, Any]) -> None:
    """The waiting task's own Delta leases tab (beside Airflow's Logs, Details, ...) and its run's tab."""
    from playwright.sync_api import expect

    page = _page(browser, site, "light")
    _open(page, f"{site['base']}/dags/daily_sales/runs/{RUN}/tasks/merge_b/plugin/delta-leases-task")
    headline = page.locator("[data-testid=headline]")
    expect(headline).to_have_text(f"waiting behind daily_sales.merge_a ({RUN})")
    tab = (
        page.get_by_role("link", name="Delta leases").or_(page.get_by_role("tab", name="Delta leases")).first
    )
    expect(tab).to_be_visible()
    expect(page.get_by_text("Logs", exact=True).first).to_be_visible()  # Airflow's own tabs around it
    top = tab.bounding_box()["y"] - 8
    _shot(page, site, "ui_ti_tab.png", clip={"x": 0, "y": top, "width": 1280, "height": 420})
    _open(page, f"{site['base']}/dags/daily_sales/runs/{RUN}/plugin/delta-leases-run")
    waiters = page.locator("[data-testid=waiter]")
    expect(waiters.first).to_be_visible()
    expect(waiters.filter(has_text="daily_sales.merge_b").first).to_contain_text("behind daily_sales.merge_a")
    expect(waiters.filter(has_text="daily_sales.optimize").first).to_contain_text(
        "behind daily_sales.merge_a"
    )
    expect(page.locator("[data-testid=cause]", has_text="queued ahead").first).to_be_visible()
    page.context.close()


def test_plan_tab_of_a_dag_shows_deltaguard_plans_report(browser: Any, site: dict[str, Any]) -> None:
    from playwright.sync_api import expect

    for scheme in ("light", "dark"):
        page = _page(browser, site, scheme)
        _open(page, f"{site['base']}/dags/deltaguard_daily_sales/plugin/delta-leases-plan")
        headline = page.locator("[data-testid=plan-headline]")
        expect(headline).to_contain_text("with deltaguard")
        expect(page.locator("[data-testid=plan-table]", has_text="customers")).to_have_count(1)
        expect(
            page.locator("[data-testid=plan-pair]", has_text="upsert_customers ↔ update_customer_tiers")
        ).to_have_count(1)
        expect(page.locator("[data-testid=plan-task]").first).to_be_visible()
        _shot(page, site, f"ui_plan{'_dark' if scheme == 'dark' else ''}.png")
        page.context.close()
