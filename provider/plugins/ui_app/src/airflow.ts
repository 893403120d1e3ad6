// What Airflow's UI hands a plugin bundle: its own React, router and Chakra UI (with the theme and colour
// mode already applied by its provider), as globals. Nothing is bundled twice, so hooks, links and the
// colour mode are Airflow's own.
/* eslint-disable @typescript-eslint/no-explicit-any */
const g = globalThis as any;

export const React = g.React;
export const h = React.createElement;
export const Fragment = React.Fragment;
export const { useEffect, useState, useCallback } = React;
export const Router = g.ReactRouterDOM;
export const C = g.ChakraUI;

/** The feature's one name, as the menu, the tabs and the extra links say it. */
export const NAME = "Delta leases";
/** Route of the task-instance tab (ui.py TASK_INSTANCE_ROUTE). */
export const TI_ROUTE = "delta-leases-task";
/** Route of the Browse entry (ui.py NAV_ROUTE). */
export const NAV_ROUTE = "delta-leases";

/** A URL of the plugin's JSON API, relative to Airflow's <base href> (holds under [api] base_url). */
export function apiUrl(path: string, query: Record<string, string | number | undefined> = {}): string {
  const url = new URL(`deltaguard/api/${path}`, document.baseURI);
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== "") url.searchParams.set(k, String(v));
  }
  return url.toString();
}

/** GET a JSON endpoint with the UI's cookie, re-read every `everyMs` (live queues change). */
export function useJson(url: string | null, everyMs = 5000): { data: any; error: string | null } {
  const [state, setState] = useState({ data: null, error: null });
  useEffect(() => {
    if (!url) return undefined;
    let live = true;
    const load = () =>
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(async (r) => {
          const body = await r.json().catch(() => ({}));
          if (!live) return;
          setState(r.ok ? { data: body, error: null } : { data: null, error: body.detail || `HTTP ${r.status}` });
        })
        .catch((e) => live && setState({ data: null, error: String(e) }));
    load();
    const timer = everyMs ? setInterval(load, everyMs) : null;
    return () => {
      live = false;
      if (timer) clearInterval(timer);
    };
  }, [url, everyMs]);
  return state;
}

export interface Owner {
  dag_id?: string;
  run_id?: string;
  task_id?: string;
  map_index?: number;
  try_number?: number;
  describe?: string;
}

/** The task instance's page in Airflow (path inside Airflow's router); with `tab`, its Delta leases tab. */
export function tiPath(o: Owner, tab = false): string | null {
  if (!o || !o.dag_id || !o.run_id || !o.task_id) return null;
  const e = encodeURIComponent;
  let path = `/dags/${e(o.dag_id)}/runs/${e(o.run_id)}/tasks/${e(o.task_id)}`;
  if (o.map_index !== undefined && o.map_index >= 0) path += `/mapped/${o.map_index}`;
  return tab ? `${path}/plugin/${TI_ROUTE}` : path;
}

/** The Table view inside Airflow. */
export function tablePath(uri: string): string {
  return `/plugin/${NAV_ROUTE}?table=${encodeURIComponent(uri)}`;
}
