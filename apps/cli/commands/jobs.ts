import { type CliDeps, type CliRuntime, count, parse, UsageError } from '../command.ts';

/** `jobs status|failed|retry`: the queues on Redis (REDIS_URL) and what the database says of the work. */
export async function run([sub, ...rest]: string[], deps: CliDeps): Promise<number> {
  const { config, open, out, err } = deps;
  const { values, positionals } = parse(rest, { json: { type: 'boolean' }, limit: { type: 'string' } });
  if (sub !== 'status' && sub !== 'failed' && sub !== 'retry') {
    throw new UsageError('jobs: expected status, failed or retry');
  }
  const jobs = config.REDIS_URL ? await deps.openQueues() : undefined;
  try {
    if (sub === 'retry') {
      const id = positionals[0];
      if (!id) throw new UsageError('jobs retry: expected the id of a failed job (see `jobs failed`)');
      if (!jobs) return noQueues(err);
      if (!(await jobs.retry(id))) {
        err(`no failed job ${id}; \`jobs failed\` lists them`);
        return 1;
      }
      err(`job ${id} queued again; its attempts start over`);
      return 0;
    }
    if (sub === 'failed') {
      const limit = count('limit', 50, values.limit as string | undefined);
      if (!jobs) return noQueues(err);
      const failed = await jobs.failed(limit);
      if (values.json) out(JSON.stringify(failed));
      else if (failed.length === 0) err('no failed jobs');
      else {
        for (const job of failed) {
          out(
            `${job.failedAt?.toISOString() ?? '-'}  ${job.queue.padEnd(11)} ${job.name.padEnd(24)} ${job.id}  ` +
              `after ${job.attempts} attempt(s): ${job.reason}`,
          );
        }
      }
      return 0;
    }
    const rt = await open();
    const backlog = await workBacklog(rt);
    const queues = jobs ? await jobs.status() : null;
    const subscriptions = await subscriptionLag(rt, deps);
    if (values.json) {
      out(JSON.stringify({ queues, subscriptions, ...backlog }));
      return 0;
    }
    if (queues) {
      out('queue        waiting  active  delayed  failed  oldest waiting');
      for (const q of queues) {
        const oldest = q.oldestWaitingMs === null ? '-' : `${(q.oldestWaitingMs / 1000).toFixed(1)} s`;
        out(
          `${q.queue.padEnd(12)} ${String(q.waiting).padStart(7)} ${String(q.active).padStart(7)} ` +
            `${String(q.delayed).padStart(8)} ${String(q.failed).padStart(7)}  ${oldest}`,
        );
      }
    } else {
      out(
        'queues: in the server process (no REDIS_URL); the /readyz of its metrics listener (METRICS_PORT) shows them',
      );
    }
    const w = backlog.webhooks;
    out(
      `webhooks: ${w.pending} pending (oldest due ${w.oldest_due ?? '-'}), ${w.failed} failed for good, ` +
        `${w.disabled_endpoints} endpoint(s) disabled`,
    );
    out(`scheduled articles: ${backlog.scheduled_articles} (next due ${backlog.next_publication ?? '-'})`);
    for (const sub of subscriptions)
      out(`subscription ${sub.name}: ${sub.lag} event(s) not yet turned into jobs`);
    return 0;
  } finally {
    await jobs?.close(0);
  }
}

function noQueues(err: (text: string) => void): number {
  err(
    'jobs: no REDIS_URL: the queues live in the server process; its failed jobs are in its log, and counted by the /readyz of its metrics listener (METRICS_PORT)',
  );
  return 1;
}

/** The subscriptions that turn the log into jobs (webhooks@1, publishing@1), and how far behind each is. */
async function subscriptionLag(
  rt: CliRuntime,
  deps: Pick<CliDeps, 'logSubscriptions'>,
): Promise<Array<{ name: string; lag: number }>> {
  const [subscriptions, { lagOf }] = await Promise.all([
    deps.logSubscriptions(rt),
    import('../../../infra/projection-runner.ts'),
  ]);
  const lags: Array<{ name: string; lag: number }> = [];
  for (const sub of subscriptions) lags.push({ name: sub.name, lag: await lagOf(rt.db, sub) });
  return lags;
}

/** What waits in the database: webhook deliveries and scheduled articles. */
async function workBacklog(rt: CliRuntime) {
  const deliveries = await rt.db
    .selectFrom('webhook_deliveries')
    .select((eb) => [
      eb.fn.count<string>('id').filterWhere('status', '=', 'pending').as('pending'),
      eb.fn.count<string>('id').filterWhere('status', '=', 'failed').as('failed'),
      eb.fn.min('next_attempt_at').filterWhere('status', '=', 'pending').as('oldest'),
    ])
    .executeTakeFirstOrThrow();
  const disabled = await rt.db
    .selectFrom('webhook_endpoints')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('enabled', '=', false)
    .executeTakeFirstOrThrow();
  const scheduled = await rt.db
    .selectFrom('articles')
    .select((eb) => [eb.fn.countAll<string>().as('n'), eb.fn.min('published_at').as('next')])
    .where('status', '=', 'scheduled')
    .executeTakeFirstOrThrow();
  const iso = (d: unknown): string | null => (d instanceof Date ? d.toISOString() : null);
  return {
    webhooks: {
      pending: Number(deliveries.pending),
      failed: Number(deliveries.failed),
      oldest_due: iso(deliveries.oldest),
      disabled_endpoints: Number(disabled.n),
    },
    scheduled_articles: Number(scheduled.n),
    next_publication: iso(scheduled.next),
  };
}
