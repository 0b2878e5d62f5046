import { hostname } from 'node:os';
import pg from 'pg';
import type { ContainerRuntimeClient } from 'testcontainers';

/*
 * The PostgreSQL and Redis servers a test run uses, chosen once per run (a global setup of the suite
 * and of the tests run alone) and named to the test workers by TEST_DATABASE_URL and TEST_REDIS_URL:
 *
 * - a variable that is set names its server, and nothing is started for it;
 * - otherwise, when a container engine answers (Docker, or podman's Docker-compatible socket through
 *   DOCKER_HOST), a container of TEST_POSTGRES_IMAGE / TEST_REDIS_IMAGE is started for the run
 *   (testcontainers) and removed after it;
 * - otherwise the servers on 127.0.0.1:5432 and 6379 are used.
 *
 * TEST_CONTAINERS=off never tries an engine; TEST_CONTAINERS=require fails the run when none answers
 * (CI sets it, so that a broken engine cannot quietly turn into the local servers).
 *
 * testcontainers' reaper (Ryuk) is off: its image comes from a registry, and some machines reach none.
 * Each container carries the run's pid and host instead, and a run removes the containers of runs on
 * its host whose process is gone (a run killed before its teardown).
 */

export const DEFAULT_POSTGRES_IMAGE = 'docker.io/library/postgres:15';
export const DEFAULT_REDIS_IMAGE = 'docker.io/library/redis:7';
const RUN_PID = 'content-service.test-run.pid';
const RUN_HOST = 'content-service.test-run.host';
const PASSWORD = 'test';

export type ContainersMode = 'auto' | 'off' | 'require';

export function containersMode(value: string | undefined): ContainersMode {
  if (value === undefined || value === '' || value === 'auto') return 'auto';
  if (value === 'off' || value === 'require') return value;
  throw new Error(`TEST_CONTAINERS=${value}: expected auto, off or require`);
}

function isSet(name: string): boolean {
  const value = process.env[name];
  return value !== undefined && value !== '';
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The labels of a run's containers: its pid and host. */
export function runLabels(pid: number): Record<string, string> {
  return { [RUN_PID]: String(pid), [RUN_HOST]: hostname() };
}

/** Removes the containers of earlier runs on this host whose process is gone; returns their ids. */
export async function removeLeftovers(
  engine: ContainerRuntimeClient['container']['dockerode'],
): Promise<string[]> {
  const removed: string[] = [];
  for (const info of await engine.listContainers({ all: true, filters: { label: [RUN_PID] } })) {
    const pid = Number(info.Labels[RUN_PID]);
    if (info.Labels[RUN_HOST] !== hostname() || !(pid > 0) || alive(pid)) continue;
    await engine.getContainer(info.Id).remove({ force: true, v: true });
    removed.push(info.Id);
  }
  return removed;
}

/*
 * The suite's and the alone tests' setups both call startTestServices, in either order, and vitest
 * tears them down in either order too: the containers are shared by the calls of one run (kept on the
 * process, as each setup file may load its own copy of this module) and stopped by the last teardown.
 */
type Shared = { users: number; stop: () => Promise<void> };
const SHARED = Symbol.for('content-service.test-services');
const holder = globalThis as { [SHARED]?: Shared };

/** Starts what the run needs (once per run) and sets the variables; returns what stops it. */
export async function startTestServices(
  log: (line: string) => void = console.log,
): Promise<() => Promise<void>> {
  // For the test workers too (they inherit it), which start containers of their own.
  process.env.TESTCONTAINERS_RYUK_DISABLED ??= 'true';
  let shared = holder[SHARED];
  if (!shared) {
    shared = { users: 0, stop: await startServices(log) };
    holder[SHARED] = shared;
  }
  shared.users += 1;
  const mine = shared;
  let released = false;
  return async () => {
    if (released) return;
    released = true;
    mine.users -= 1;
    if (mine.users > 0) return;
    delete holder[SHARED];
    await mine.stop();
  };
}

async function startServices(log: (line: string) => void): Promise<() => Promise<void>> {
  const mode = containersMode(process.env.TEST_CONTAINERS);
  const needPostgres = !isSet('TEST_DATABASE_URL');
  const needRedis = !isSet('TEST_REDIS_URL');
  if (mode === 'off' || (!needPostgres && !needRedis)) return async () => {};

  const { GenericContainer, Wait, getContainerRuntimeClient } = await import('testcontainers');
  let client: Awaited<ReturnType<typeof getContainerRuntimeClient>>;
  try {
    client = await getContainerRuntimeClient();
  } catch (err) {
    if (mode === 'require') {
      throw new Error(`TEST_CONTAINERS=require, and no container engine answers: ${(err as Error).message}`, {
        cause: err,
      });
    }
    return async () => {};
  }

  await removeLeftovers(client.container.dockerode);

  const labels = runLabels(process.pid);
  const address = (started: { getHost(): string }): string =>
    started.getHost() === 'localhost' ? '127.0.0.1' : started.getHost();
  const startedAt = Date.now();
  const [postgres, redis] = await Promise.all([
    needPostgres
      ? new GenericContainer(process.env.TEST_POSTGRES_IMAGE || DEFAULT_POSTGRES_IMAGE)
          .withLabels(labels)
          .withEnvironment({ POSTGRES_PASSWORD: PASSWORD, POSTGRES_DB: 'test' })
          // A database thrown away after the run: nothing is worth an fsync.
          .withCommand(['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'])
          .withExposedPorts(5432)
          // The official image's first start runs a server on its socket only, then restarts it.
          .withWaitStrategy(Wait.forSuccessfulCommand('pg_isready -h 127.0.0.1 -U postgres -d test'))
          .withStartupTimeout(120_000)
          .start()
      : undefined,
    needRedis
      ? new GenericContainer(process.env.TEST_REDIS_IMAGE || DEFAULT_REDIS_IMAGE)
          .withLabels(labels)
          .withCommand(['--save', '', '--appendonly', 'no'])
          .withExposedPorts(6379)
          .withWaitStrategy(Wait.forSuccessfulCommand('redis-cli ping'))
          .withStartupTimeout(120_000)
          .start()
      : undefined,
  ]);
  if (postgres) {
    const url = `postgres://postgres:${PASSWORD}@${address(postgres)}:${postgres.getMappedPort(5432)}/test`;
    await reachable(url);
    process.env.TEST_DATABASE_URL = url;
  }
  if (redis) process.env.TEST_REDIS_URL = `redis://${address(redis)}:${redis.getMappedPort(6379)}`;
  // The outage scenarios' servers of their own are containers too (reliability/outage-servers.ts).
  process.env.CS_TEST_SERVICES = 'containers';
  log(
    `test services in containers (${((Date.now() - startedAt) / 1000).toFixed(1)} s): ` +
      [
        postgres && `PostgreSQL ${process.env.TEST_DATABASE_URL}`,
        redis && `Redis ${process.env.TEST_REDIS_URL}`,
      ]
        .filter(Boolean)
        .join(', '),
  );
  return async () => {
    if (postgres) delete process.env.TEST_DATABASE_URL;
    if (redis) delete process.env.TEST_REDIS_URL;
    delete process.env.CS_TEST_SERVICES;
    await Promise.all([
      postgres?.stop({ remove: true, removeVolumes: true }),
      redis?.stop({ remove: true, removeVolumes: true }),
    ]);
  };
}

/** The port is published before the server behind it answers on it through the engine's proxy. */
async function reachable(url: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.end();
      return;
    } catch (err) {
      await client.end().catch(() => {});
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** The run's Redis, as the test workers and the processes they start reach it. */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379';
