import { pendingMigrations } from '../infra/db/migrate.ts';
import type { DbHandle } from '../infra/db/open.ts';
import type { NewEvent } from '../infra/event-store.ts';
import type { Jobs, QueueStatus } from '../infra/jobs/queue.ts';
import type { Readiness } from '../infra/metrics-server.ts';
import type { Projector } from '../infra/projection.ts';
import { projectionStatus } from '../infra/projection-runner.ts';

/*
 * The detailed readiness of a process (the server, the worker), served at `GET /readyz` on its metrics
 * listener (infra/metrics-server.ts), on the private network: whether the database answers, the
 * migrations not applied, each projection's lag, the job queues. The public `/readyz` of the server
 * says only whether it takes new requests (apps/server/app.ts).
 */

/** Above this many unapplied events an async read model is reported as lagging (still ready). */
const LAG_WARNING = 10_000;

type Log = { warn(obj: object, msg: string): void };

type QueueReport = Omit<QueueStatus, 'oldestWaitingMs'> & { oldest_waiting_ms: number | null };

export type ReadinessReport = {
  status: 'ready' | 'not_ready';
  checks: {
    database: { ok: boolean; kind: string; error?: string };
    migrations: { ok: boolean; pending: string[] };
    projections: Array<{ name: string; mode: string; lag: number; lagging: boolean }>;
    jobs: { ok: boolean; kind: string; error?: string; queues: QueueReport[] };
  };
};

/** What the report reads. */
export type ReadinessParts = {
  handle: Pick<DbHandle, 'db' | 'kind'>;
  projectors: readonly Projector<NewEvent>[];
  jobs: Pick<Jobs, 'kind' | 'status'>;
  logger: Log;
};

/**
 * Ready when the database answers and no migration is pending. The queues are reported, not judged:
 * requests are served while Redis is away (jobs wait). What the database or Redis said stays in the log.
 */
export function readinessOf(parts: ReadinessParts): Readiness {
  return async () => {
    const kind = parts.handle.kind;
    let database: ReadinessReport['checks']['database'] = { ok: true, kind };
    let pending: string[] = [];
    let projections: ReadinessReport['checks']['projections'] = [];
    try {
      pending = await pendingMigrations(parts.handle.db);
      projections = (await projectionStatus(parts.handle.db, parts.projectors)).map((p) => ({
        name: p.name,
        mode: p.mode,
        lag: p.lag,
        lagging: p.lag > LAG_WARNING,
      }));
    } catch (error) {
      parts.logger.warn({ err: error }, 'readiness check: the database did not answer');
      database = { ok: false, kind, error: 'the database did not answer; the log says why' };
    }
    const jobs = await jobsCheck(parts.jobs, parts.logger);
    const ready = database.ok && pending.length === 0;
    const report: ReadinessReport = {
      status: ready ? 'ready' : 'not_ready',
      checks: { database, migrations: { ok: pending.length === 0, pending }, projections, jobs },
    };
    return { ready, body: report };
  };
}

/** The queues' depth, failures and oldest waiting job, within a second. */
async function jobsCheck(jobs: ReadinessParts['jobs'], log: Log): Promise<ReadinessReport['checks']['jobs']> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const status = await Promise.race([
      jobs.status(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('the job queues did not answer within 1 s')), 1_000);
      }),
    ]);
    return {
      ok: true,
      kind: jobs.kind,
      queues: status.map(({ oldestWaitingMs, ...q }) => ({ ...q, oldest_waiting_ms: oldestWaitingMs })),
    };
  } catch (error) {
    log.warn({ err: error }, 'readiness check: the job queues did not answer');
    return {
      ok: false,
      kind: jobs.kind,
      error: 'the job queues did not answer; the log says why',
      queues: [],
    };
  } finally {
    clearTimeout(timer);
  }
}
