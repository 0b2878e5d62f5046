import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { freePort } from '../../reliability/outage-servers.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { metricTypes } from '../support/metrics.ts';
import { cli, ROOT, run } from '../support/process.ts';
import { announcedMetricsUrl, type ServerProcess, startServer } from '../support/server.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * A real Prometheus (Debian's `prometheus` package) scrapes the real server's metrics port (METRICS_PORT,
 * its own listener) while the test makes requests through the API: an API read, an edit and a refused
 * edit. Prometheus's HTTP API is then asked for the series it stored. The alert rules the docs show
 * (containers/prometheus/alerts.yml) are checked by promtool and fire in promtool's rule tests, and
 * the real Prometheus loads them.
 *
 * Without the prometheus and promtool binaries the test is skipped, saying so, except under CI (CI=true)
 * or TEST_CONTAINERS=require, where that fails: .ci/run installs the package.
 */

const PROMETHEUS = process.env.PROMETHEUS_BIN ?? 'prometheus';
const PROMTOOL = process.env.PROMTOOL_BIN ?? 'promtool';
const ALERTS = join(ROOT, 'containers/prometheus/alerts.yml');

const installed = async (command: string): Promise<boolean> =>
  (await run(command, ['--version']).catch(() => ({ code: 1 }))).code === 0;
const available = (await installed(PROMETHEUS)) && (await installed(PROMTOOL));
const required = process.env.CI === 'true' || process.env.TEST_CONTAINERS === 'require';
if (!available && required) {
  throw new Error(
    `${PROMETHEUS} and ${PROMTOOL} are needed (Debian's prometheus package: apt-get install prometheus)`,
  );
}
if (!available) {
  process.stderr.write(
    'tests/server/prometheus.e2e.test.ts skipped: no prometheus/promtool (apt-get install prometheus)\n',
  );
}

type Seed = { account_id: string; api_key: string; sites: { id: string }[] };
type QueryResult = { metric: Record<string, string>; value: [number, string] }[];

/** The alert rules without their annotations (their texts are checked by `promtool check rules`). */
function withoutAnnotations(rules: string): string {
  const out: string[] = [];
  let skipping: number | null = null;
  for (const line of rules.split('\n')) {
    const indent = line.length - line.trimStart().length;
    if (skipping !== null && (line.trim() === '' || indent > skipping)) continue;
    skipping = null;
    if (/^\s*annotations:\s*$/.test(line)) {
      skipping = indent;
      continue;
    }
    out.push(line);
  }
  return out.join('\n');
}

describe.skipIf(!available)('a real Prometheus scraping the server', () => {
  let db: TestDatabase;
  let server: ServerProcess;
  let seed: Seed;
  let dir: string;
  let prometheus: ChildProcess | undefined;
  let prometheusUrl: string;
  let metricsUrl: string;
  let articleId: string;
  const prometheusLog: string[] = [];

  const api = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${seed.api_key}`,
        ...(body ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const query = async (promql: string): Promise<QueryResult> => {
    const res = await fetch(`${prometheusUrl}/api/v1/query?query=${encodeURIComponent(promql)}`);
    const answer = (await res.json()) as { status: string; data: { result: QueryResult }; error?: string };
    if (answer.status !== 'success') throw new Error(`${promql}: ${answer.error}`);
    return answer.data.result;
  };
  const scalar = async (promql: string): Promise<number | undefined> => {
    const [first] = await query(promql);
    return first ? Number(first.value[1]) : undefined;
  };

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    const env = { DATABASE_URL: db.databaseUrl as string };
    const seeded = await cli(
      ['seed-demo', '--json', '--sites', '1', '--articles', '3', '--backlinks', '0'],
      env,
    );
    if (seeded.code !== 0) throw new Error(seeded.stderr);
    seed = JSON.parse(seeded.stdout) as Seed;
    server = await startServer({ ...env, METRICS_PORT: '0' });
    metricsUrl = announcedMetricsUrl(server);

    dir = await mkdtemp(join(tmpdir(), 'cs-prometheus-'));
    const port = await freePort();
    prometheusUrl = `http://127.0.0.1:${port}`;
    const target = new URL(metricsUrl).host;
    await writeFile(
      join(dir, 'prometheus.yml'),
      [
        'global:',
        '  scrape_interval: 1s',
        '  evaluation_interval: 1s',
        'rule_files:',
        `  - ${ALERTS}`,
        'scrape_configs:',
        '  - job_name: content-service',
        '    scrape_interval: 1s',
        '    scrape_timeout: 1s',
        '    static_configs:',
        `      - targets: ['${target}']`,
        '',
      ].join('\n'),
    );
    prometheus = spawn(
      PROMETHEUS,
      [
        `--config.file=${join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const keep = (d: Buffer) => prometheusLog.push(d.toString());
    prometheus.stdout?.on('data', keep);
    prometheus.stderr?.on('data', keep);
    await vi.waitFor(async () => {
      if (prometheus?.exitCode !== null) throw new Error(`prometheus exited:\n${prometheusLog.join('')}`);
      expect((await fetch(`${prometheusUrl}/-/ready`)).status).toBe(200);
    }, PATIENCE);

    const list = await api('GET', `/api/v1/sites/${seed.sites[0]?.id}/articles`);
    articleId = String((list.body.data as { id: string }[])[0]?.id);
  }, 120_000);

  afterAll(async () => {
    if (prometheus && prometheus.exitCode === null) {
      const exited = new Promise((resolve) => prometheus?.once('exit', resolve));
      prometheus.kill('SIGTERM');
      await exited;
    }
    await server?.stop();
    await db?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('stores the request histogram by route, the edits by origin and the refusals by code, as the server counted them', async () => {
    // An API read, twice; an edit; an edit refused for dropping the protected links.
    for (let i = 0; i < 2; i++) expect((await api('GET', `/api/v1/articles/${articleId}`)).status).toBe(200);
    expect((await api('PUT', `/api/v1/articles/${articleId}`, { title: 'Scraped and edited' })).status).toBe(
      200,
    );
    const refused = await api('PUT', `/api/v1/articles/${articleId}`, { body: '<p>No links.</p>' });
    expect(refused.status).toBe(422);
    expect(refused.body.code).toBe('protected_links_modified');

    await vi.waitFor(async () => {
      const [target] = (
        (await (await fetch(`${prometheusUrl}/api/v1/targets`)).json()) as {
          data: { activeTargets: { health: string; lastError: string }[] };
        }
      ).data.activeTargets;
      expect(target?.health, target?.lastError).toBe('up');
      expect(
        await scalar(
          'sum(content_service_http_request_duration_seconds_count{face="api",route="/api/v1/articles/:id",method="GET",status="200"})',
        ),
      ).toBe(2);
      expect(await scalar('sum(content_service_edits_total{origin="api",change="edit"})')).toBe(1);
      expect(
        await scalar('sum(content_service_refusals_total{face="api",code="protected_links_modified"})'),
      ).toBe(1);
    }, PATIENCE);

    // The PUTs by status, from the same histogram; the read's latency as a quantile.
    const puts = await query(
      'sum by (status) (content_service_http_request_duration_seconds_count{route="/api/v1/articles/:id",method="PUT"})',
    );
    expect(Object.fromEntries(puts.map((r) => [r.metric.status, Number(r.value[1])]))).toEqual({
      '200': 1,
      '422': 1,
    });
    const p99 = await scalar(
      'histogram_quantile(0.99, sum by (le) (content_service_http_request_duration_seconds_bucket{route="/api/v1/articles/:id",method="GET"}))',
    );
    expect(p99).toBeGreaterThan(0);
    // The gauges read at scrape, and Node's own.
    expect(await scalar('content_service_database_up')).toBe(1);
    expect(await scalar('max(content_service_db_pool_max)')).toBe(10);
    expect(await scalar('count(content_service_projector_lag_events)')).toBeGreaterThanOrEqual(2);
    expect(await scalar('nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
    expect(await scalar('nodejs_eventloop_lag_p99_seconds')).toBeGreaterThanOrEqual(0);
  });

  it('loads the documented alert rules, none firing on a healthy server', async () => {
    const rules = (await (await fetch(`${prometheusUrl}/api/v1/rules`)).json()) as {
      data: { groups: { rules: { name: string; health: string; state: string }[] }[] };
    };
    const loaded = rules.data.groups.flatMap((g) => g.rules);
    expect(loaded.map((r) => r.name).sort()).toEqual([
      'ContentServiceDatabaseAway',
      'ContentServiceProjectorStuck',
      'ContentServiceRedisAway',
      'ContentServiceReplicaLagging',
      'ContentServiceWebhookEndpointFailing',
    ]);
    await vi.waitFor(async () => {
      const now = (await (await fetch(`${prometheusUrl}/api/v1/rules`)).json()) as typeof rules;
      for (const rule of now.data.groups.flatMap((g) => g.rules)) {
        expect(rule.health, rule.name).toBe('ok');
        expect(rule.state, rule.name).toBe('inactive');
      }
    }, PATIENCE);
  });

  it('serves metrics on the metrics port only: the public port has no /metrics', async () => {
    expect((await fetch(`${server.url}/metrics`)).status).toBe(404);
    expect((await fetch(metricsUrl)).status).toBe(200);
  });

  it('names in the docs and the alert rules what the server exports, and the docs name everything it exports', async () => {
    const exported = [...metricTypes(await (await fetch(metricsUrl)).text()).keys()].filter((n) =>
      n.startsWith('content_service_'),
    );
    const family = (name: string) => name.replace(/_(bucket|count|sum)$/, '');
    const namesIn = (text: string) => [
      ...new Set([...text.matchAll(/content_service_[a-z0-9_]+/g)].map((m) => m[0])),
    ];
    const operations = await readFile(join(ROOT, 'docs/operations.md'), 'utf8');
    const section = operations.slice(operations.indexOf('\n## Metrics'));
    const documented = namesIn(
      section.slice(0, section.indexOf('\n## ', 5) === -1 ? undefined : section.indexOf('\n## ', 5)),
    );
    for (const name of documented)
      expect(exported, `docs/operations.md names ${name}`).toContain(family(name));
    for (const name of exported)
      expect(documented.map(family), `docs/operations.md lacks ${name}`).toContain(name);
    for (const name of namesIn(await readFile(ALERTS, 'utf8'))) {
      expect(exported, `alerts.yml names ${name}`).toContain(family(name));
    }
  });
});

describe.skipIf(!available)('the documented alert rules', () => {
  it('pass promtool check rules', async () => {
    const checked = await run(PROMTOOL, ['check', 'rules', ALERTS]);
    expect(checked.stdout + checked.stderr).toContain('SUCCESS: 5 rules found');
    expect(checked.code).toBe(0);
  });

  it("are the compose deployment's, whose Prometheus configuration passes promtool check config", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cs-promtool-'));
    try {
      const config = await readFile(join(ROOT, 'containers/prometheus/prometheus.yml'), 'utf8');
      expect(config).toContain('/etc/prometheus/alerts.yml');
      // In the image the rules are at /etc/prometheus (containers/prometheus.Containerfile); here, in the repo.
      await writeFile(join(dir, 'prometheus.yml'), config.replace('/etc/prometheus/alerts.yml', ALERTS));
      const checked = await run(PROMTOOL, ['check', 'config', join(dir, 'prometheus.yml')]);
      expect(checked.stdout + checked.stderr).toContain('is valid prometheus config file syntax');
      expect(checked.code).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('fire on the failures they are for, and not before their time (promtool test rules)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cs-promtool-'));
    try {
      await writeFile(join(dir, 'alerts.yml'), withoutAnnotations(await readFile(ALERTS, 'utf8')));
      const app = 'instance: "app-1:9464", job: content-service';
      await writeFile(
        join(dir, 'test.yml'),
        `rule_files: [alerts.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'content_service_database_up{instance="app-1:9464",job="content-service"}'
        values: '1 0 0 0 0'
      - series: 'content_service_database_up{instance="app-2:9464",job="content-service"}'
        values: '1 1 1 1 1'
      - series: 'content_service_redis_up{instance="app-1:9464",job="content-service",connection="jobs"}'
        values: '1 1 0 0 0'
      - series: 'content_service_projector_lag_seconds{instance="worker-1:9464",job="content-service",projector="site_stats@1"}'
        values: '0 60 120 180 240 300 360 420 480 540 600'
      - series: 'content_service_projector_lag_seconds{instance="app-1:9464",job="content-service",projector="site_stats@1"}'
        values: '0 60 120 180 240 300 360 420 480 540 600'
      - series: 'content_service_projector_lag_seconds{instance="worker-1:9464",job="content-service",projector="backlinks@1"}'
        values: '0x10'
    alert_rule_test:
      - eval_time: 1m
        alertname: ContentServiceDatabaseAway
        exp_alerts: []
      - eval_time: 4m
        alertname: ContentServiceDatabaseAway
        exp_alerts:
          - exp_labels: { severity: critical, ${app} }
      - eval_time: 2m
        alertname: ContentServiceRedisAway
        exp_alerts: []
      - eval_time: 4m
        alertname: ContentServiceRedisAway
        exp_alerts:
          - exp_labels: { severity: warning, connection: jobs, ${app} }
      - eval_time: 6m
        alertname: ContentServiceProjectorStuck
        exp_alerts: []
      - eval_time: 9m
        alertname: ContentServiceProjectorStuck
        exp_alerts:
          - exp_labels: { severity: warning, projector: site_stats@1 }
  - interval: 1m
    input_series:
      - series: 'content_service_webhook_endpoints_failing{instance="worker-1:9464",job="content-service"}'
        values: '0 1x90'
      - series: 'content_service_webhook_endpoints_failing{instance="app-1:9464",job="content-service"}'
        values: '0 1x90'
    alert_rule_test:
      - eval_time: 30m
        alertname: ContentServiceWebhookEndpointFailing
        exp_alerts: []
      - eval_time: 75m
        alertname: ContentServiceWebhookEndpointFailing
        exp_alerts:
          - exp_labels: { severity: info, job: content-service }
  - interval: 30s
    input_series:
      - series: 'content_service_db_replica_lag_seconds{instance="app-1:9464",job="content-service",replica="replica-1:5432"}'
        values: '0 1 2 40x10'
      - series: 'content_service_db_replica_lag_seconds{instance="app-2:9464",job="content-service",replica="replica-1:5432"}'
        values: '0 1 2 40x10'
      - series: 'content_service_db_replica_lag_seconds{instance="app-1:9464",job="content-service",replica="replica-2:5432"}'
        values: '0 0 3 0x10'
    alert_rule_test:
      - eval_time: 2m
        alertname: ContentServiceReplicaLagging
        exp_alerts: []
      - eval_time: 4m
        alertname: ContentServiceReplicaLagging
        exp_alerts:
          - exp_labels: { severity: warning, replica: "replica-1:5432" }
`,
      );
      const tested = await run(PROMTOOL, ['test', 'rules', join(dir, 'test.yml')]);
      expect(tested.stdout + tested.stderr).toContain('SUCCESS');
      expect(tested.code).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
