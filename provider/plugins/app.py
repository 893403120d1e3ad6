"""The FastAPI app the plugin mounts under the api-server at ``/deltaguard``: the JSON API the UI reads.

Airflow does not protect a plugin's FastAPI app, so every route here depends on Airflow's own
:func:`airflow.api_fastapi.core_api.security.get_user` (the UI's ``_token`` cookie or an
``Authorization: Bearer`` JWT, validated by the configured auth manager) and then asks the auth manager:

* reads need ``is_authorized_custom_view(GET, "deltaguard")``; a task instance's decision and a DAG's
  waiting tasks and plan also need read access to the task instances of that DAG;
* the one write, ``POST /api/leases/{id}/release-stale``, needs ``is_authorized_custom_view(DELETE,
  "deltaguard")`` *and* edit access to the task instances of the DAG that holds the lease (the same right
  as marking that task failed); it only accepts a JSON body, so a cross-site HTML form cannot send it.

Anonymous requests and requests with an invalid or expired token get 401 (JSON) or, for a browser opening
the API description, a redirect to the login page; authenticated users without the right get 403. FastAPI's own ``/docs``, ``/redoc`` and
``/openapi.json`` are replaced by routes behind the same read check, since the API description is part of
the UI. The lease store is ``[deltaguard] lease_store_url`` (or ``lease_store_conn_id``), read on every
request.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from deltaguard.plugins import service
from deltaguard.plugins.reads import MAX_LIMIT, LeaseNotFoundError, NotStaleError, UiReader

log = logging.getLogger("deltaguard.ui")

#: Where the built React bundle lives in the package (``make ui-bundle`` writes it from ``ui_app/``).
BUNDLE_DIR = Path(__file__).parent / "static"
#: The only files ``/static/`` serves.
_BUNDLE_FILES = frozenset({"delta-leases.js"})

#: The resource name the auth manager is asked about (``is_authorized_custom_view``).
RESOURCE = "deltaguard"

_readers: dict[str, UiReader] = {}
_readers_lock = threading.Lock()


def reader() -> UiReader:
    """The reader of the configured lease store (one per URL, kept open; the URL is read every time)."""
    from deltaguard import config
    from deltaguard.leases.admin import open_store

    url = config.lease_store_url()
    with _readers_lock:
        found = _readers.get(url)
        if found is None:
            found = _readers[url] = UiReader(open_store(url))
        return found


def _auth_manager() -> Any:
    from airflow.api_fastapi.app import get_auth_manager

    return get_auth_manager()


async def _user(request: Request) -> Any:
    """The authenticated Airflow user (401 when there is none or the token is invalid/expired).

    Airflow's :func:`get_user` answers a token that fails validation with 403; here it is 401, as RFC 6750
    section 3.1 asks for ``invalid_token``: the client is not authenticated, so signing in again helps
    (and a browser is sent to the login page instead of an error).
    """
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.security import HTTPBearer

    credentials = await HTTPBearer(auto_error=False)(request)
    try:
        return await get_user(request, None, credentials)
    except HTTPException as exc:
        if exc.status_code != status.HTTP_403_FORBIDDEN:
            raise
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            str(exc.detail),
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        ) from None


def _require(allowed: bool, what: str) -> None:
    if not allowed:
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"not allowed to {what}")


async def read_user(request: Request) -> Any:
    """Dependency: an authenticated user allowed to read the deltaguard views."""
    user = await _user(request)
    _require(
        _auth_manager().is_authorized_custom_view(method="GET", resource_name=RESOURCE, user=user),
        "read deltaguard views",
    )
    return user


def _require_dag(user: Any, dag_id: str, method: str) -> None:
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    allowed = _auth_manager().is_authorized_dag(
        method=method, access_entity=DagAccessEntity.TASK_INSTANCE, details=DagDetails(id=dag_id), user=user
    )
    _require(allowed, f"{'read' if method == 'GET' else 'change'} task instances of DAG {dag_id!r}")


ReadUser = Annotated[Any, Depends(read_user)]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"page size (at most {MAX_LIMIT})")]


def _base(request: Request) -> str:
    """The path this app is served under, as the browser sees it (``[api] base_url``'s path + mount)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def _bad_request(exc: Exception) -> HTTPException:
    return HTTPException(status.HTTP_400_BAD_REQUEST, str(exc))


#: The largest map index (Airflow stores it as a 32-bit INTEGER).
MAX_MAP_INDEX = 2**31 - 1


def create_app() -> FastAPI:
    """Build the app (routes are documented in FastAPI's OpenAPI at ``/deltaguard/docs``)."""
    app = FastAPI(
        title="deltaguard UI",
        description="Why a Delta write waits, who holds the table, and what the conflict matrix says. "
        "Every route needs an authenticated Airflow user (cookie `_token` or `Authorization: Bearer`).",
        version="1",
        # FastAPI would serve these to anyone; the protected routes below replace them.
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    @app.exception_handler(HTTPException)
    async def _html_login_redirect(request: Request, exc: HTTPException) -> Response:
        # A browser opening the API description without a session goes to Airflow's login and comes back.
        wants_html = "text/html" in request.headers.get("accept", "") and not request.url.path.startswith(
            f"{request.scope.get('root_path', '')}/api/"
        )
        if exc.status_code == status.HTTP_401_UNAUTHORIZED and wants_html and request.method == "GET":
            try:
                login = _auth_manager().get_url_login(next_url=str(request.url))
            except Exception:
                login = None
            if login:
                return RedirectResponse(login, status_code=status.HTTP_303_SEE_OTHER)
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    @app.middleware("http")
    async def _refuse_nul(request: Request, call_next: Any) -> Response:
        # No table, DAG, run, task or lease name holds a NUL character, and PostgreSQL cannot even compare
        # text holding one (its driver raises): such a request is bad input, answered before any route runs.
        values = (str(request.scope.get("path", "")), *request.query_params.values())
        if any("\x00" in value for value in values):
            return JSONResponse(
                {"detail": "a NUL character is not allowed in the path or a query parameter"},
                status_code=status.HTTP_400_BAD_REQUEST,
            )
        response: Response = await call_next(request)
        return response

    from deltaguard.leases.store import StoreUnavailableError

    @app.exception_handler(StoreUnavailableError)
    async def _store_unavailable(request: Request, exc: StoreUnavailableError) -> Response:
        # The message names the store with its password redacted; a 503 says "try again", not "bug".
        log.warning("deltaguard UI: %s", exc)
        return JSONResponse({"detail": str(exc)}, status_code=status.HTTP_503_SERVICE_UNAVAILABLE)

    # --- JSON ---------------------------------------------------------------------------------------

    @app.get("/api/tables", summary="Tables with configuration in words, leases and waiting queue")
    def api_tables(user: ReadUser, limit: Limit = 50, after: str | None = None) -> dict[str, Any]:
        return service.tables(reader(), after=after, limit=limit)

    @app.get("/api/table", summary="One table: summary, conflict matrix, recent decisions, timeline")
    def api_table(
        user: ReadUser,
        uri: str,
        engine: str | None = None,
        version: str | None = None,
        limit: Limit = 50,
        before: float | None = None,
    ) -> dict[str, Any]:
        try:
            return service.table_detail(
                reader(), uri, engine=engine, version=version, limit=limit, before=before
            )
        except service.NotFoundError as exc:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from exc
        except ValueError as exc:
            raise _bad_request(exc) from exc

    @app.get("/api/decisions", summary="A page of the decision log, newest first")
    def api_decisions(
        user: ReadUser, uri: str | None = None, limit: Limit = 50, before: float | None = None
    ) -> dict[str, Any]:
        return service.decisions(reader(), uri=uri, before=before, limit=limit)

    @app.get("/api/decision", summary="What deltaguard decided for one task instance")
    def api_decision(
        user: ReadUser,
        dag_id: str,
        run_id: str,
        task_id: str,
        map_index: int = Query(-1, ge=-1, le=MAX_MAP_INDEX),
        try_number: int | None = Query(None, ge=0),
    ) -> dict[str, Any]:
        _require_dag(user, dag_id, "GET")
        try:
            return service.task_instance_decision(
                reader(),
                dag_id=dag_id,
                run_id=run_id,
                task_id=task_id,
                map_index=map_index,
                try_number=try_number,
            )
        except ValueError as exc:
            raise _bad_request(exc) from exc

    @app.get("/api/waiting", summary="Task instances waiting now, with whom they wait for and why")
    def api_waiting(
        user: ReadUser, dag_id: str | None = None, run_id: str | None = None, limit: Limit = 50
    ) -> dict[str, Any]:
        if dag_id:
            _require_dag(user, dag_id, "GET")
        return service.waiting(reader(), dag_id=dag_id, run_id=run_id, limit=limit)

    @app.get("/api/plan", summary="deltaguard plan's report of one DAG (its writes, conflicts and makespans)")
    def api_plan(user: ReadUser, dag_id: str) -> dict[str, Any]:
        from deltaguard import config
        from deltaguard.plugins.plans import PlanUnavailableError, plan_report

        _require_dag(user, dag_id, "GET")
        try:
            return plan_report(dag_id, config.lease_store_url() or None)
        except PlanUnavailableError as exc:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from exc

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> Response:
        # The React bundle Airflow's UI imports (``react_apps``): code only, no data, so no login needed
        # (Airflow loads it before it renders the page that would carry the user's token).
        path = BUNDLE_DIR / name
        if name not in _BUNDLE_FILES or not path.is_file():
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no static file {name!r}")
        return Response(
            path.read_bytes(),
            media_type="text/javascript" if name.endswith(".js") else "text/css",
            headers={"Cache-Control": "no-cache"},
        )

    @app.post(
        "/api/leases/{lease_id}/release-stale",
        summary="Release an expired (stale) lease; live leases are refused with 409. Logged with the user.",
    )
    async def api_release_stale(lease_id: str, request: Request) -> dict[str, Any]:
        user = await _user(request)
        # Permissions first (the route's, then the DAG's): a user without them learns nothing of the body rules.
        _require(
            _auth_manager().is_authorized_custom_view(method="DELETE", resource_name=RESOURCE, user=user),
            "release deltaguard leases",
        )
        store = reader()
        rows = store.store.read_lease(lease_id)
        if not rows:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"lease {lease_id} does not exist")
        from deltaguard.plugins.views import owner_view

        owner = owner_view(rows[0].owner_json)
        _require_dag(user, str(owner.get("dag_id", "")), "PUT")
        # Only a JSON body, checked before anything changes: a cross-site HTML form cannot send one.
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, "send a JSON body ({})")
        try:
            released = store.release_stale(lease_id, user.get_name())
        except LeaseNotFoundError as exc:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from exc
        except NotStaleError as exc:
            raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from exc
        log.warning(
            "user %s released stale lease %s held by %s", user.get_name(), lease_id, owner["describe"]
        )
        return {"released": lease_id, "tables": [r.uri for r in released], "by": user.get_name()}

    # --- API description, behind the same read check as the API -----------------------------------

    @app.get("/openapi.json", include_in_schema=False)
    def openapi(user: ReadUser) -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request, user: ReadUser) -> HTMLResponse:
        from fastapi.openapi.docs import get_swagger_ui_html

        return get_swagger_ui_html(openapi_url=f"{_base(request)}/openapi.json", title=f"{app.title} - API")

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request, user: ReadUser) -> HTMLResponse:
        from fastapi.openapi.docs import get_redoc_html

        return get_redoc_html(openapi_url=f"{_base(request)}/openapi.json", title=f"{app.title} - ReDoc")

    return app
