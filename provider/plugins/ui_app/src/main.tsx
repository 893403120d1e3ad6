// The Delta leases app: one component Airflow renders as the Browse entry, a DAG-run tab, a task-instance
// tab and a home-page panel. Everything it says comes from the plugin's JSON endpoints (the conflict model
// in deltaguard.core); it only lays the answers out with Airflow's own Chakra components and tokens.
/* eslint-disable @typescript-eslint/no-explicit-any */
import { C, Fragment, NAME, Owner, Router, apiUrl, h, tablePath, tiPath, useJson, useState } from "./airflow";

void Fragment;
void h;

function TaskLink({ owner, tab = true }: { owner: Owner; tab?: boolean }) {
  const to = tiPath(owner, tab);
  const label = owner.describe || owner.task_id || "unknown task";
  if (!to) return <C.Text as="span">{label}</C.Text>;
  return (
    <C.Link asChild colorPalette="brand" fontWeight="semibold" data-testid="task-link">
      <Router.Link to={to} title={`${owner.dag_id} / ${owner.run_id} / ${owner.task_id}`}>
        {label}
      </Router.Link>
    </C.Link>
  );
}

/** The operator's app id of a write, shown on hover beside its operation kind. */
function appIdTitle(label: string | null | undefined): string | undefined {
  return label ? `app id ${label}` : undefined;
}

function RunLabel({ owner }: { owner: Owner }) {
  return owner.run_id ? (
    <C.Text as="span" color="fg.muted" fontSize="xs">
      {" "}
      run {owner.run_id}
      {owner.try_number ? `, try ${owner.try_number}` : ""}
    </C.Text>
  ) : null;
}

/** Who blocks, why in one line, what to change, and the model's full reason one click away. */
function Blocker({ b }: { b: any }) {
  const [open, setOpen] = useState(false);
  const who: Owner | null = b.who;
  return (
    <C.Box borderLeftWidth="3px" borderColor="orange.solid" pl="3" py="1" data-testid="blocker">
      <C.Text fontSize="sm">
        behind{" "}
        {who && who.task_id ? <TaskLink owner={who} /> : <C.Text as="span" fontWeight="semibold">{b.owner}</C.Text>}
        {who ? <RunLabel owner={who} /> : null}
        <C.Text as="span" color="fg.muted">
          {" "}
          (<span title={appIdTitle(b.operation_label)}>{b.operation}</span>
          {b.kind === "waiting" ? ", queued ahead" : ", holds the table"})
        </C.Text>
      </C.Text>
      {b.why ? (
        <C.Text fontSize="sm" data-testid="why">
          {b.why}
        </C.Text>
      ) : null}
      {b.changes && b.changes.length ? (
        <C.Stack gap="1" mt="1" data-testid="changes">
          {b.changes.map((c: any, i: number) => (
            <C.HStack key={i} gap="2" alignItems="baseline">
              <C.Badge colorPalette="green" variant="subtle" size="sm">
                {c.kind.replace("_", " ")}
              </C.Badge>
              <C.Text fontSize="sm">{c.text}</C.Text>
            </C.HStack>
          ))}
        </C.Stack>
      ) : null}
      {b.rule_reason ? (
        <C.Box mt="1">
          <C.Button size="2xs" variant="ghost" onClick={() => setOpen(!open)} data-testid="reason-toggle">
            {open ? "hide the full reason" : "full reason"}
          </C.Button>
          {open ? (
            <C.Text fontSize="xs" color="fg.muted" data-testid="reason">
              {b.rule_reason} <C.Code size="sm">{b.rule}</C.Code>
            </C.Text>
          ) : null}
        </C.Box>
      ) : null}
    </C.Box>
  );
}

function Title({ children }: { children: any }) {
  return (
    <C.Heading size="lg" mb="3" data-testid="title">
      {children}
    </C.Heading>
  );
}

function Problem({ error }: { error: string | null }) {
  if (!error) return <C.Spinner size="sm" />;
  return <C.Text color="fg.error">{error}</C.Text>;
}

function Card({ children, ...rest }: any) {
  return (
    <C.Box borderWidth="1px" borderColor="border" borderRadius="md" bg="bg.panel" p="4" mb="4" {...rest}>
      {children}
    </C.Box>
  );
}

/** When a wait is expected to end (the admission rule's reservation over the writes' estimates). */
function Eta({ e }: { e: any }) {
  if (!e) return null;
  const palette = e.state === "overdue" ? "red" : e.state === "unknown" ? "gray" : "blue";
  const label =
    e.state === "known"
      ? `starts in ~${fmtSeconds(e.in_s)}`
      : e.state === "overdue"
        ? "overdue"
        : e.state === "any_moment"
          ? "any moment"
          : "no estimate";
  return (
    <C.Badge colorPalette={palette} variant="subtle" ml="2" title={e.text} data-testid="eta">
      {label}
    </C.Badge>
  );
}

function fmtSeconds(s: number): string {
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

/** Why writes that asked later are ahead of this one (priority, or a grant by backfilling). */
function Overtaken({ o }: { o: any }) {
  if (!o) return null;
  return (
    <C.Text fontSize="xs" color="fg.muted" ml="4" data-testid="overtaken">
      <C.Badge colorPalette="purple" variant="subtle" size="sm" mr="1">
        overtaken
      </C.Badge>
      {o.text}
    </C.Text>
  );
}

/** One cause, said once: the model's one line, what to change, who it holds back behind whom. */
function Cause({ c }: { c: any }) {
  const [open, setOpen] = useState(false);
  return (
    <C.Box borderLeftWidth="3px" borderColor="orange.solid" pl="3" py="1" data-testid="cause">
      <C.Text fontSize="sm" fontWeight="semibold" data-testid="why">
        {c.why}
      </C.Text>
      <C.Text fontSize="sm" data-testid="cause-who">
        <C.Text as="span" color="fg.muted">
          holds back{" "}
        </C.Text>
        {c.waiters.map((w: any, i: number) => (
          <Fragment key={w.request_id}>
            {i ? ", " : ""}
            <TaskLink owner={w.owner} />
          </Fragment>
        ))}
        <C.Text as="span" color="fg.muted">
          {" "}
          behind{" "}
        </C.Text>
        {c.blockers.map((b: any, i: number) => (
          <Fragment key={b.id || i}>
            {i ? ", " : ""}
            {b.who && b.who.task_id ? <TaskLink owner={b.who} /> : <C.Text as="span">{b.owner}</C.Text>}
            <C.Text as="span" color="fg.muted" fontSize="xs">
              {" "}
              (<span title={appIdTitle(b.operation_label)}>{b.operation}</span>
              {b.kind === "waiting" ? ", queued ahead" : ", holds the table"})
            </C.Text>
          </Fragment>
        ))}
      </C.Text>
      {c.changes && c.changes.length ? (
        <C.Stack gap="1" mt="1" data-testid="changes">
          {c.changes.map((ch: any, i: number) => (
            <C.HStack key={i} gap="2" alignItems="baseline">
              <C.Badge colorPalette="green" variant="subtle" size="sm">
                {ch.kind.replace("_", " ")}
              </C.Badge>
              <C.Text fontSize="sm">{ch.text}</C.Text>
            </C.HStack>
          ))}
        </C.Stack>
      ) : null}
      {c.rule_reason ? (
        <C.Box mt="1">
          <C.Button size="2xs" variant="ghost" onClick={() => setOpen(!open)} data-testid="reason-toggle">
            {open ? "hide the full reason" : "full reason"}
          </C.Button>
          {open ? (
            <C.Text fontSize="xs" color="fg.muted" data-testid="reason">
              {c.rule_reason} <C.Code size="sm">{c.rule}</C.Code>
            </C.Text>
          ) : null}
        </C.Box>
      ) : null}
    </C.Box>
  );
}

/** The queue: one line per waiting write, then each cause once for all the writes it holds back. */
function Waiters({ waiting, causes, showTable = false }: { waiting: any[]; causes?: any[]; showTable?: boolean }) {
  if (!waiting.length) return <C.Text color="fg.muted">nobody waits</C.Text>;
  return (
    <C.Stack gap="2">
      {waiting.map((w: any) => (
        <C.Box key={w.request_id} data-testid="waiter">
          <C.Text>
            <C.Badge colorPalette="orange" mr="2">
              waiting {w.waiting_s != null ? `${Math.round(w.waiting_s)} s` : ""}
            </C.Badge>
            <TaskLink owner={w.owner} />
            <C.Text as="span" color="fg.muted">
              {" "}
              <span title={appIdTitle(w.operation_label)} data-testid="operation">
                {w.operation}
              </span>
              {showTable ? ` on ${w.table}` : ""}
              {w.position ? `, position ${w.position}` : ""}
              {w.blockers.length
                ? `, behind ${Array.from(new Set(w.blockers.map((b: any) => b.owner))).join(", ")}`
                : ""}
            </C.Text>
            <Eta e={w.expected_start} />
          </C.Text>
          <Overtaken o={w.overtaken} />
        </C.Box>
      ))}
      {causes && causes.length ? (
        <C.Stack gap="2" mt="1">
          <C.Text fontSize="xs" color="fg.muted" textTransform="uppercase" letterSpacing="wide">
            {causes.length === 1 ? "Cause" : `Causes (${causes.length})`}
          </C.Text>
          {causes.map((c: any, i: number) => (
            <Cause key={i} c={c} />
          ))}
        </C.Stack>
      ) : null}
    </C.Stack>
  );
}

function Config({ c }: { c: any }) {
  if (!c.known) return <C.Text color="fg.muted">{c.summary}</C.Text>;
  return (
    <C.Text fontSize="sm" color="fg.muted" data-testid="config">
      {c.engine} · {c.isolation_level} · {c.partitions_text === "not partitioned" ? "not partitioned" : `partitioned by ${c.partitions_text}`}
      {c.clustering && c.clustering.length ? ` · clustered by ${c.clustering.join(", ")}` : ""} · deletion vectors{" "}
      {c.deletion_vectors ? "on" : "off"} · row-level concurrency {c.row_level_concurrency.enabled ? "yes" : "no"}
    </C.Text>
  );
}

function Leases({ leases }: { leases: any[] }) {
  if (!leases.length) return <C.Text color="fg.muted">nobody holds this table</C.Text>;
  return (
    <C.Table.Root size="sm" variant="line">
      <C.Table.Header>
        <C.Table.Row>
          <C.Table.ColumnHeader>Holder</C.Table.ColumnHeader>
          <C.Table.ColumnHeader>Operation</C.Table.ColumnHeader>
          <C.Table.ColumnHeader>Held for</C.Table.ColumnHeader>
          <C.Table.ColumnHeader>Expected to end</C.Table.ColumnHeader>
          <C.Table.ColumnHeader>Expires</C.Table.ColumnHeader>
        </C.Table.Row>
      </C.Table.Header>
      <C.Table.Body>
        {leases.map((l: any) => (
          <C.Table.Row key={l.lease_id} data-testid="lease">
            <C.Table.Cell>
              <TaskLink owner={l.owner} />
              <RunLabel owner={l.owner} />
            </C.Table.Cell>
            <C.Table.Cell title={appIdTitle(l.operation_label)} data-testid="operation">
              {l.operation}
            </C.Table.Cell>
            <C.Table.Cell>{Math.round(l.age_s)} s</C.Table.Cell>
            <C.Table.Cell title={l.expected_end ? l.expected_end.text : undefined} data-testid="lease-eta">
              {!l.expected_end || l.expected_end.state === "unknown"
                ? "no estimate"
                : l.expected_end.state === "overdue"
                  ? `overdue by ${fmtSeconds(-l.expected_end.in_s)}`
                  : `in ~${fmtSeconds(l.expected_end.in_s)}`}
            </C.Table.Cell>
            <C.Table.Cell>
              {l.stale ? (
                <C.Badge colorPalette="red">expired {Math.round(-l.expires_in_s)} s ago</C.Badge>
              ) : (
                `in ${Math.round(l.expires_in_s)} s`
              )}
            </C.Table.Cell>
          </C.Table.Row>
        ))}
      </C.Table.Body>
    </C.Table.Root>
  );
}

function TableCard({ t, link = true }: { t: any; link?: boolean }) {
  return (
    <Card data-testid="table-card">
      <C.Heading size="md">
        {link ? (
          <C.Link asChild colorPalette="brand">
            <Router.Link to={tablePath(t.uri)}>{t.name}</Router.Link>
          </C.Link>
        ) : (
          t.name
        )}{" "}
        <C.Text as="span" fontSize="xs" color="fg.muted" fontWeight="normal">
          {t.uri}
        </C.Text>
      </C.Heading>
      <Config c={t.config} />
      <C.Heading size="sm" mt="3" mb="1">
        Holding ({t.leases.length})
      </C.Heading>
      <Leases leases={t.leases} />
      <C.Heading size="sm" mt="3" mb="1">
        Waiting ({t.waiting.length})
      </C.Heading>
      <Waiters waiting={t.waiting} causes={t.causes} />
    </Card>
  );
}

function TablesView() {
  const { data, error } = useJson(apiUrl("tables"));
  return (
    <C.Box p="4">
      <Title>{NAME}</Title>
      {!data ? (
        <Problem error={error} />
      ) : data.tables.length ? (
        data.tables.map((t: any) => <TableCard key={t.uri} t={t} />)
      ) : (
        <C.Text color="fg.muted">No table yet: deltaguard has not admitted any write with this lease store.</C.Text>
      )}
    </C.Box>
  );
}

function Matrix({ m }: { m: any }) {
  return (
    <C.Box overflowX="auto">
      <C.Text fontSize="sm" mb="2">
        {m.engine}
        {m.assumed_config ? " (table configuration unknown: a default table)" : ""}: green cannot conflict, red can.
        Hover a cell for the reason.
      </C.Text>
      <C.Table.Root size="sm" variant="outline" width="auto">
        <C.Table.Header>
          <C.Table.Row>
            <C.Table.ColumnHeader />
            {m.labels.map((l: string) => (
              <C.Table.ColumnHeader key={l} fontSize="2xs">
                {l}
              </C.Table.ColumnHeader>
            ))}
          </C.Table.Row>
        </C.Table.Header>
        <C.Table.Body>
          {m.rows.map((r: any) => (
            <C.Table.Row key={r.label}>
              <C.Table.Cell fontSize="xs" fontWeight="semibold">
                {r.label}
              </C.Table.Cell>
              {r.cells.map((c: any, i: number) => (
                <C.Table.Cell
                  key={i}
                  textAlign="center"
                  fontSize="2xs"
                  bg={c.conflict ? "red.muted" : "green.muted"}
                  title={`${c.a} x ${c.b}: ${c.reason} [rule ${c.rule}]`}
                >
                  {c.text}
                </C.Table.Cell>
              ))}
            </C.Table.Row>
          ))}
        </C.Table.Body>
      </C.Table.Root>
    </C.Box>
  );
}

function TableView({ uri }: { uri: string }) {
  const { data, error } = useJson(apiUrl("table", { uri }));
  return (
    <C.Box p="4">
      <Title>
        <C.Link asChild colorPalette="brand">
          <Router.Link to={`/plugin/delta-leases`}>{NAME}</Router.Link>
        </C.Link>{" "}
        / {data ? data.table.name : uri}
      </Title>
      {!data ? (
        <Problem error={error} />
      ) : (
        <Fragment>
          {data.overruns.length > 0 && (
            <Card data-testid="overruns" borderColor="red.solid" bg="red.subtle">
              <C.Heading size="md" mb="2">
                Possibly written outside a lease
              </C.Heading>
              <C.Text color="fg.muted" mb="2">
                A write ended or committed after its lease was lost while another writer may have held the
                table: check it for lost or duplicated rows.
              </C.Text>
              <Log rows={data.overruns} />
            </Card>
          )}
          <TableCard t={data.table} link={false} />
          <Card data-testid="timeline">
            <C.Heading size="md" mb="2">
              Timeline
            </C.Heading>
            <Timeline t={data.timeline} />
          </Card>
          <Card>
            <C.Heading size="md" mb="2">
              Conflict matrix
            </C.Heading>
            <Matrix m={data.matrix} />
          </Card>
          <Card>
            <C.Heading size="md" mb="2">
              Recent decisions
            </C.Heading>
            <Log rows={data.decisions} />
          </Card>
        </Fragment>
      )}
    </C.Box>
  );
}

/** Recent writes on the table: a waiting bar then a writing bar per write, on one time axis. */
function Timeline({ t }: { t: any }) {
  if (!t.rows.length) return <C.Text color="fg.muted">no write in the recent decision log</C.Text>;
  return (
    <C.Stack gap="1">
      <C.Text fontSize="xs" color="fg.muted">
        {t.window.from} to {t.window.to} ({fmtSeconds(t.window.seconds)}):{" "}
        <C.Box as="span" display="inline-block" w="3" h="2" bg="orange.solid" borderRadius="sm" /> waiting{" "}
        <C.Box as="span" display="inline-block" w="3" h="2" bg="blue.solid" borderRadius="sm" /> writing
      </C.Text>
      {t.rows.map((r: any) => (
        <C.HStack key={r.request_id} gap="2" data-testid="timeline-row">
          <C.Box w="220px" flexShrink={0} fontSize="sm" truncate>
            <TaskLink owner={r.owner} />
          </C.Box>
          <C.Box position="relative" flex="1" h="4" bg="bg.muted" borderRadius="sm">
            {r.bars.map((b: any, i: number) => (
              <C.Box
                key={i}
                position="absolute"
                top="0.5"
                h="3"
                borderRadius="sm"
                left={`${b.left}%`}
                width={`${b.width}%`}
                bg={b.kind === "waiting" ? "orange.solid" : "blue.solid"}
                opacity={b.open ? 0.7 : 1}
                title={`${b.kind} ${b.seconds} s${b.open ? " (still held)" : ""}`}
                data-testid="timeline-bar"
                data-kind={b.kind}
              />
            ))}
          </C.Box>
        </C.HStack>
      ))}
    </C.Stack>
  );
}

function Log({ rows }: { rows: any[] }) {
  return (
    <C.Table.Root size="sm" variant="line">
      <C.Table.Body>
        {rows.map((d: any, i: number) => (
          <C.Table.Row key={i}>
            <C.Table.Cell whiteSpace="nowrap" color="fg.muted">
              {d.at_iso}
            </C.Table.Cell>
            <C.Table.Cell>{d.kind}</C.Table.Cell>
            <C.Table.Cell>
              <TaskLink owner={d.owner} />
            </C.Table.Cell>
            <C.Table.Cell>{d.summary}</C.Table.Cell>
          </C.Table.Row>
        ))}
      </C.Table.Body>
    </C.Table.Root>
  );
}

function TaskView({ dagId, runId, taskId, mapIndex }: any) {
  const { data, error } = useJson(
    apiUrl("decision", { dag_id: dagId, run_id: runId, task_id: taskId, map_index: mapIndex ?? -1 }),
  );
  const [showLog, setShowLog] = useState(false);
  if (!data) return <C.Box p="4"><Problem error={error} /></C.Box>;
  const latest = data.attempts[data.attempts.length - 1];
  const waiting = latest && latest.status === "waiting";
  return (
    <C.Box p="2">
      <C.HStack mb="3" gap="2">
        <C.Badge colorPalette={!latest ? "gray" : waiting ? "orange" : latest.waited ? "yellow" : "green"} size="lg">
          {!latest ? "no lease" : waiting ? "waiting" : latest.status}
        </C.Badge>
        <C.Text fontWeight="semibold" data-testid="headline">
          {data.headline}
        </C.Text>
      </C.HStack>
      {data.attempts
        .slice()
        .reverse()
        .map((a: any) => (
          <Card key={a.request_id}>
            <C.Heading size="sm" mb="2">
              Try {a.try_number}: {a.status}
              {a.waited ? `, waited ${(a.waited_s || 0).toFixed(1)} s` : ""}
            </C.Heading>
            {Object.entries(a.operations).map(([uri, op]: any) => (
              <C.Text key={uri} fontSize="sm">
                <C.Link asChild colorPalette="brand">
                  <Router.Link to={tablePath(uri)}>{uri.replace(/\/$/, "").split("/").pop()}</Router.Link>
                </C.Link>
                : {op}
              </C.Text>
            ))}
            {a.waits.length ? (
              <C.Stack gap="2" mt="2">
                {a.waits[a.waits.length - 1].blockers.map((b: any, i: number) => (
                  <Blocker key={i} b={b} />
                ))}
              </C.Stack>
            ) : null}
            <C.Button size="2xs" variant="ghost" mt="2" onClick={() => setShowLog(!showLog)}>
              {showLog ? "hide the decision log" : `decision log (${a.log.length})`}
            </C.Button>
            {showLog ? <Log rows={a.log} /> : null}
          </Card>
        ))}
    </C.Box>
  );
}

function RunView({ dagId, runId }: any) {
  const { data, error } = useJson(apiUrl("waiting", { dag_id: dagId, run_id: runId }));
  return (
    <C.Box p="2">
      {!data ? <Problem error={error} /> : <Waiters waiting={data.waiting} causes={data.causes} showTable />}
    </C.Box>
  );
}

/** One line on Airflow's home page, so its own dashboard stays on the first screen. */
function HomePanel() {
  const { data } = useJson(apiUrl("waiting", { limit: 50 }));
  if (!data) return null;
  const n = data.waiting.length;
  const tables = Array.from(new Set(data.waiting.map((w: any) => w.table)));
  const longest = n ? Math.max(...data.waiting.map((w: any) => w.waiting_s || 0)) : 0;
  return (
    <C.HStack
      gap="2"
      px="3"
      py="1.5"
      mb="2"
      borderWidth="1px"
      borderColor="border"
      borderRadius="md"
      bg="bg.panel"
      fontSize="sm"
      data-testid="home-panel"
    >
      <C.Link asChild colorPalette="brand" fontWeight="semibold">
        <Router.Link to="/plugin/delta-leases">{NAME}</Router.Link>
      </C.Link>
      {n ? (
        <Fragment>
          <C.Badge colorPalette="orange">
            {n}
            {data.more ? "+" : ""} waiting
          </C.Badge>
          <C.Text color="fg.muted" truncate>
            on {tables.join(", ")} · longest {fmtSeconds(longest)} · {data.causes.length}{" "}
            {data.causes.length === 1 ? "cause" : "causes"}
          </C.Text>
        </Fragment>
      ) : (
        <C.Text color="fg.muted">no write waits</C.Text>
      )}
    </C.HStack>
  );
}

/** A DAG's plan: `deltaguard plan`'s own JSON report, laid out (nothing is recomputed here). */
function PlanView({ dagId }: { dagId: string }) {
  const { data, error } = useJson(apiUrl("plan", { dag_id: dagId }), 60000);
  const [showAssumptions, setShowAssumptions] = useState(false);
  if (!data) return <C.Box p="2"><Problem error={error} /></C.Box>;
  const m = data.makespan;
  const schedule = m.deltaguard;
  const span = Math.max(schedule.makespan_s, 1);
  return (
    <C.Box p="2" data-testid="plan">
      <C.Text fontWeight="semibold" mb="1" data-testid="plan-headline">
        Planned run: {fmtSeconds(m.deltaguard.makespan_s)} with deltaguard, {fmtSeconds(m.one_slot_pools.makespan_s)} with
        one-slot pools, {fmtSeconds(m.all_at_once.makespan_s)} all at once
        {data.all_at_once_conflicting_overlaps.length
          ? ` (where ${data.all_at_once_conflicting_overlaps.length} conflicting writes would overlap)`
          : ""}
      </C.Text>
      <C.Text fontSize="xs" color="fg.muted" mb="3">
        the report of <C.Code size="sm">deltaguard plan --dag-id {data.dag_id}</C.Code>; lower bound{" "}
        {fmtSeconds(data.lower_bound_s)}
      </C.Text>
      {data.tables.map((t: any) => (
        <Card key={t.table} data-testid="plan-table">
          <C.Heading size="sm">
            {t.table.replace(/\/$/, "").split("/").pop()}{" "}
            <C.Text as="span" fontSize="xs" color="fg.muted" fontWeight="normal">
              {t.engine} · configuration {t.config_source} · {t.writes.length} writes
            </C.Text>
          </C.Heading>
          {t.serializing.length ? (
            <C.Stack gap="1" mt="2">
              {t.serializing.map((p: any, i: number) => (
                <C.Box key={i} borderLeftWidth="3px" borderColor="orange.solid" pl="3" data-testid="plan-pair">
                  <C.Text fontSize="sm">
                    <C.Text as="span" fontWeight="semibold">
                      {p.a} ↔ {p.b}
                    </C.Text>
                    <C.Text as="span" color="fg.muted">
                      {" "}
                      run one after the other: {p.why}
                    </C.Text>
                  </C.Text>
                  {(p.changes || []).map((ch: any, j: number) => (
                    <C.HStack key={j} gap="2" alignItems="baseline">
                      <C.Badge colorPalette="green" variant="subtle" size="sm">
                        {ch.kind.replace("_", " ")}
                      </C.Badge>
                      <C.Text fontSize="sm">{ch.text}</C.Text>
                    </C.HStack>
                  ))}
                </C.Box>
              ))}
            </C.Stack>
          ) : (
            <C.Text fontSize="sm" color="fg.muted" mt="1">
              no pair of its writes waits for the other
            </C.Text>
          )}
          {t.side_by_side.length ? (
            <C.Text fontSize="xs" color="fg.muted" mt="1">
              side by side: {t.side_by_side.map((p: string[]) => p.join(" + ")).join(", ")}
            </C.Text>
          ) : null}
        </Card>
      ))}
      <Card>
        <C.Heading size="sm" mb="2">
          Planned run with deltaguard
        </C.Heading>
        <C.Stack gap="1">
          {schedule.tasks.map((r: any) => (
            <C.HStack key={r.task} gap="2" data-testid="plan-task">
              <C.Box w="220px" flexShrink={0} fontSize="sm" truncate title={r.task}>
                {r.task}
              </C.Box>
              <C.Box position="relative" flex="1" h="4" bg="bg.muted" borderRadius="sm">
                <C.Box
                  position="absolute"
                  top="0.5"
                  h="3"
                  borderRadius="sm"
                  bg="blue.solid"
                  left={`${(100 * r.start_s) / span}%`}
                  width={`${Math.max(0.5, (100 * (r.end_s - r.start_s)) / span)}%`}
                  title={`${r.start_s} s to ${r.end_s} s`}
                />
              </C.Box>
            </C.HStack>
          ))}
        </C.Stack>
      </Card>
      <C.Button size="2xs" variant="ghost" onClick={() => setShowAssumptions(!showAssumptions)}>
        {showAssumptions ? "hide the assumptions" : `assumptions (${data.assumptions.length})`}
      </C.Button>
      {showAssumptions ? (
        <C.Stack gap="1" fontSize="xs" color="fg.muted" data-testid="plan-assumptions">
          {data.assumptions.map((a: string, i: number) => (
            <C.Text key={i}>{a}</C.Text>
          ))}
        </C.Stack>
      ) : null}
    </C.Box>
  );
}

function DeltaLeases(props: { dagId?: string; runId?: string; taskId?: string; mapIndex?: string }) {
  const [params] = Router.useSearchParams();
  if (props.taskId) return <TaskView {...props} />;
  if (props.runId) return <RunView {...props} />;
  if (props.dagId) return <PlanView dagId={props.dagId} />;
  if (!window.location.pathname.includes("/plugin/")) return <HomePanel />;
  const table = params.get("table");
  return table ? <TableView uri={table} /> : <TablesView />;
}

(globalThis as any).AirflowPlugin = DeltaLeases;
export default DeltaLeases;
