import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import type { Actor } from '../../domain/event.ts';
import type { Config } from '../../infra/config.ts';
import { ConfigError } from '../../infra/config-error.ts';
import { newPassword } from '../../infra/ids.ts';
import type { Runtime } from '../runtime.ts';
import type { IngestKind } from './ingest.ts';

/*
 * The CLI's commands, each loading what it uses when it runs (`await import`): `--help` and a usage
 * error load nothing of the database, the runtime or the application, and a command only its own
 * part of them.
 */

type CliIo = {
  out: (text: string) => void;
  err: (text: string) => void;
  /** Where `--password-stdin` reads from; process.stdin when not given. */
  stdin?: NodeJS.ReadableStream;
};

const USAGE = `Usage: npm run cli -- <command> [options]

  migrate                                   apply database migrations
  seed-demo [--sites N] [--articles N] [--backlinks N] [--seed N] [--json]
                                            a new demo account (counts per site; defaults 2, 12, 40)
  accounts create --name NAME --email EMAIL [--password P]
  accounts set-password --email EMAIL [--password-stdin]
                                            a new password: read from stdin, or generated and printed;
                                            signs the account out of every browser
  keys create --account ID [--name NAME] [--scope read|write]
  keys list --account ID
  keys revoke --account ID --key KEY_ID
  staff create --name NAME --email EMAIL [--password P]
  staff set-password --email EMAIL [--password-stdin]
  ingest sites|articles|backlinks|rewrites --file F.jsonl [--account ID]
                                            (--file - reads standard input)
  projections status
  projections rebuild [NAME]                drop a read model and replay every event (all when no NAME)
  media gc [--dry-run] [--grace-hours N]    remove stored images no revision refers to, stored more
                                            than N hours ago (default 24)
  idempotency purge                         delete Idempotency-Key records older than 24 hours
  reports make [--period YYYY-MM]           each site's monthly report (default: last month) and its
                                            report.ready webhook; a report made already is kept
  jobs status [--json]                      queue depth, failures, the oldest waiting job; the
                                            subscriptions' lag and the webhook backlog
  jobs failed [--limit N] [--json]          the jobs that failed every attempt (newest first)
  jobs retry ID                             run a failed job again
  export --to FILE                          the whole installation (event log, credentials, images) in
                                            one archive, with a manifest of counts and checksums
  import --from FILE [--media-dir DIR]      an export into an empty database (checked whole first),
                                            then every read model replayed
  move --to postgres://... [--media-dir DIR]
                                            the embedded database in DATA_DIR to an empty PostgreSQL
                                            database, in one step (the server stopped)

Environment: DATABASE_URL (unset: embedded PGlite in DATA_DIR, default ./data, which one process opens
at a time: stop the server first), MEDIA_DIR, LOG_LEVEL, REDIS_URL and JOBS_PREFIX (the job queues;
unset REDIS_URL: they live in the server process).`;

class UsageError extends Error {}

/** Refuses a password the policy does not accept as a usage error, before anything is opened. */
async function checkNewPassword(password: string): Promise<void> {
  const { passwordProblem } = await import('../../domain/account/password.ts');
  const problem = passwordProblem(password);
  if (problem !== null) throw new UsageError(`the password must be ${problem}`);
}

/** The first line of stdin (a password piped in: `printf '%s' "$P" | npm run cli -- ... --password-stdin`). */
async function readPassword(stdin: NodeJS.ReadableStream = process.stdin): Promise<string> {
  let text = '';
  for await (const chunk of stdin) {
    text += typeof chunk === 'string' ? chunk : (chunk as Buffer).toString('utf8');
    if (text.length > 8192) break;
  }
  return text.split(/\r?\n/)[0] ?? '';
}

/** Who makes a change from the CLI, in the account's activity log. */
const OPERATOR: Actor = { type: 'system', id: 'cli', name: 'Operator (CLI)' };

/** Records a change the CLI made to an account in its activity log (source `system`), once stored. */
async function recordOperatorChange(
  rt: Runtime | undefined,
  accountId: string,
  operation: string,
): Promise<void> {
  if (!rt) throw new Error('the runtime is opened before a change is recorded');
  const { createActivity } = await import('../application/activity.ts');
  const stored = createActivity(rt).record({
    accountId,
    source: 'system',
    actor: OPERATOR,
    operation,
    subject: { siteId: null, articleId: null, revision: null },
    status: 200,
    requestId: null,
    durationMs: 0,
  });
  // Stored now rather than after the batch's delay: the command is about to exit.
  await rt.commands.flushCalls();
  await stored;
}

/**
 * The async read models (backlinks, statistics, activity) catch up before the command returns. A
 * transaction still appending to the log can hold events back (docs/architecture.md); past 20 s the
 * command says so and leaves them to the server's or worker's projectors.
 */
async function bringAsyncUpToDate(rt: Runtime, err: (text: string) => void): Promise<void> {
  const [{ asyncProjectors }, { catchUp }, { progressBar }] = await Promise.all([
    import('../../projections/index.ts'),
    import('../../infra/projection-runner.ts'),
    import('./progress.ts'),
  ]);
  for (const p of asyncProjectors) {
    const bar = progressBar(`project ${p.name}`, 0);
    try {
      await catchUp(rt.db, p, ({ done, total }) => bar.update(done, total), { timeoutMs: 20_000 });
    } catch (error) {
      err(
        `${error instanceof Error ? error.message : String(error)}; the server's projectors will apply them`,
      );
    } finally {
      bar.stop();
    }
  }
}

const count = (name: string, fallback: number, value: string | undefined): number => {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 10_000_000)
    throw new UsageError(`--${name} must be a whole number from 0 to 10000000`);
  return n;
};

function required(values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`--${name} is required`);
  return v;
}

function parse<const T extends ParseArgsOptionsConfig>(args: string[], options: T) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true } as const);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** Runs one CLI command; returns the exit code. Results go to `out` (stdout), everything else to `err`. */
export async function runCli(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  io?: CliIo,
): Promise<number> {
  const { out, err } = io ?? {
    out: (t: string) => process.stdout.write(`${t}\n`),
    err: (t: string) => process.stderr.write(`${t}\n`),
  };
  const [command, ...rest] = argv;
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    (command ? out : err)(USAGE);
    return command ? 0 : 2;
  }
  let config: Config;
  try {
    const { loadConfig } = await import('../../infra/config.ts');
    config = loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      err(error.message);
      return 2;
    }
    throw error;
  }
  let runtime: Runtime | undefined;
  // What the embedded database's lock says of this process to another one.
  const sub = rest[0] !== undefined && !rest[0].startsWith('-') ? ` ${rest[0]}` : '';
  const holder = `the CLI command ${command}${sub} (npm run cli)`;
  const open = async (): Promise<Runtime> => {
    const { openRuntime } = await import('../runtime.ts');
    runtime = await openRuntime(config, { migrate: true, poolSize: 4, holder });
    return runtime;
  };
  try {
    switch (command) {
      case 'migrate': {
        parse(rest, {});
        const [{ openRuntime }, { migrateToLatest, newerMigrationsMessage }] = await Promise.all([
          import('../runtime.ts'),
          import('../../infra/db/migrate.ts'),
        ]);
        const rt = await openRuntime(config, { migrate: false, poolSize: 1, holder });
        runtime = rt;
        const { applied, newer } = await migrateToLatest(rt.db);
        err(
          applied.length
            ? `applied ${applied.length} migration(s): ${applied.join(', ')}`
            : newer.length
              ? `warning: ${newerMigrationsMessage(newer)}`
              : 'database is up to date',
        );
        return 0;
      }
      case 'seed-demo': {
        const { values } = parse(rest, {
          sites: { type: 'string' },
          articles: { type: 'string' },
          backlinks: { type: 'string' },
          seed: { type: 'string' },
          json: { type: 'boolean' },
        });
        const opts = {
          sites: count('sites', 2, values.sites),
          articles: count('articles', 12, values.articles),
          backlinks: count('backlinks', 40, values.backlinks),
          ...(values.seed !== undefined ? { seed: count('seed', 0, values.seed) } : {}),
        };
        const { seedDemo } = await import('./seed-demo.ts');
        const rt = await open();
        const result = await seedDemo(rt, opts);
        await bringAsyncUpToDate(rt, err);
        if (values.json) out(JSON.stringify(result));
        else {
          out(`account  ${result.account_id}`);
          out(`sign in  ${result.email} / ${result.password}`);
          out(`api key  ${result.api_key}   (write scope; shown once)`);
          for (const s of result.sites) out(`site     ${s.id}  ${s.domain}`);
        }
        return 0;
      }
      case 'accounts':
      case 'staff': {
        const [sub, ...args] = rest;
        if (sub === 'set-password') {
          const { values } = parse(args, {
            email: { type: 'string' },
            'password-stdin': { type: 'boolean' },
          });
          const email = required(values, 'email');
          const password = values['password-stdin'] ? await readPassword(io?.stdin) : newPassword();
          await checkNewPassword(password);
          const [{ createAccounts }, { createCredentials }, { DomainError }] = await Promise.all([
            import('../application/accounts.ts'),
            import('../application/credentials.ts'),
            import('../../domain/errors.ts'),
          ]);
          const rt = await open();
          const accounts = createAccounts(rt);
          const credentials = createCredentials(rt);
          if (command === 'accounts') {
            const account = await accounts.findByEmail(email);
            if (!account) throw new DomainError('not_found', `No account with email ${email}`);
            await credentials.setAccountPassword(account.id, password);
            await recordOperatorChange(runtime, account.id, 'change_password');
            out(
              JSON.stringify({
                account_id: account.id,
                email: account.email,
                ...(values['password-stdin'] ? {} : { password }),
              }),
            );
          } else {
            const staff = await accounts.findStaffByEmail(email);
            if (!staff) throw new DomainError('not_found', `No staff member with email ${email}`);
            await credentials.setStaffPassword(staff.id, password);
            out(
              JSON.stringify({
                staff_id: staff.id,
                email: staff.email,
                ...(values['password-stdin'] ? {} : { password }),
              }),
            );
          }
          return 0;
        }
        if (sub !== 'create') throw new UsageError(`${command}: expected "create" or "set-password"`);
        const { values } = parse(args, {
          name: { type: 'string' },
          email: { type: 'string' },
          password: { type: 'string' },
        });
        const { z } = await import('zod');
        const email = z.email().safeParse(required(values, 'email'));
        if (!email.success) throw new UsageError('--email must be an email address');
        const password = values.password ?? newPassword();
        await checkNewPassword(password);
        const person = { name: required(values, 'name'), email: email.data, password };
        const { createAccounts } = await import('../application/accounts.ts');
        const accounts = createAccounts(await open());
        let created: { account_id: string } | { staff_id: string };
        if (command === 'accounts') {
          const { accountId } = await accounts.open(person);
          await recordOperatorChange(runtime, accountId, 'open_account');
          created = { account_id: accountId };
        } else {
          created = { staff_id: (await accounts.addStaff(person)).staffId };
        }
        out(JSON.stringify({ ...created, email: email.data, ...(values.password ? {} : { password }) }));
        return 0;
      }
      case 'keys': {
        const [sub, ...args] = rest;
        if (sub === 'create') {
          const { values } = parse(args, {
            account: { type: 'string' },
            name: { type: 'string' },
            scope: { type: 'string' },
          });
          const { KeyScope } = await import('../../domain/account/events.ts');
          const scope = KeyScope.safeParse(values.scope ?? 'read');
          if (!scope.success) throw new UsageError('--scope must be read or write');
          const accountId = required(values, 'account');
          const { createKeys } = await import('../application/keys.ts');
          const rt = await open();
          const key = await createKeys(rt).create(accountId, {
            name: values.name ?? 'API key',
            scope: scope.data,
          });
          await recordOperatorChange(rt, accountId, 'create_api_key');
          out(JSON.stringify({ key_id: key.keyId, api_key: key.key, prefix: key.prefix, scope: key.scope }));
          err('The key is shown this once: store it now. Only its hash is kept.');
          return 0;
        }
        if (sub === 'list') {
          const { values } = parse(args, { account: { type: 'string' } });
          const { createKeys } = await import('../application/keys.ts');
          const keys = await createKeys(await open()).list(required(values, 'account'));
          for (const k of keys) {
            out(
              JSON.stringify({
                key_id: k.id,
                name: k.name,
                prefix: k.prefix,
                scope: k.scope,
                created_at: k.created_at.toISOString(),
                revoked_at: k.revoked_at?.toISOString() ?? null,
                last_used_at: k.last_used_at?.toISOString() ?? null,
              }),
            );
          }
          return 0;
        }
        if (sub === 'revoke') {
          const { values } = parse(args, { account: { type: 'string' }, key: { type: 'string' } });
          const accountId = required(values, 'account');
          const { createKeys } = await import('../application/keys.ts');
          const rt = await open();
          const r = await createKeys(rt).revoke(accountId, required(values, 'key'));
          if (r.revoked) await recordOperatorChange(rt, accountId, 'revoke_api_key');
          err(r.revoked ? 'key revoked' : 'key was already revoked');
          return 0;
        }
        throw new UsageError('keys: expected create, list or revoke');
      }
      case 'ingest': {
        const [kind, ...args] = rest;
        const { ingestFile, ingestKinds } = await import('./ingest.ts');
        if (!ingestKinds.includes(kind as IngestKind))
          throw new UsageError(`ingest: expected one of ${ingestKinds.join(', ')}`);
        const { values } = parse(args, { file: { type: 'string' }, account: { type: 'string' } });
        const file = required(values, 'file');
        const rt = await open();
        const report = await ingestFile(rt.commands, kind as IngestKind, file, { account: values.account });
        await bringAsyncUpToDate(rt, err);
        for (const f of report.failed) err(`${file === '-' ? 'stdin' : file}:${f.line}: ${f.error}`);
        err(`${report.applied} applied, ${report.unchanged} unchanged, ${report.failed.length} failed`);
        out(JSON.stringify(report));
        return report.failed.length > 0 ? 1 : 0;
      }
      case 'projections': {
        const [sub, ...args] = rest;
        const { positionals } = parse(args, {});
        const [{ findProjector, projectors }, { projectionStatus, rebuild }, { progressBar }] =
          await Promise.all([
            import('../../projections/index.ts'),
            import('../../infra/projection-runner.ts'),
            import('./progress.ts'),
          ]);
        const rt = await open();
        if (sub === 'status') {
          for (const s of await projectionStatus(rt.db, projectors)) {
            const cp = s.checkpoint
              ? `checkpoint ${s.checkpoint.transactionId}/${s.checkpoint.position}`
              : 'same transaction as the append';
            out(`${s.name.padEnd(16)} ${s.mode.padEnd(6)} lag ${String(s.lag).padStart(8)}  ${cp}`);
          }
          return 0;
        }
        if (sub === 'rebuild') {
          const name = positionals[0];
          const chosen = name ? [findProjector(name)] : projectors;
          if (chosen.some((p) => p === undefined)) {
            throw new UsageError(
              `unknown projection ${name}; known: ${projectors.map((p) => p.name).join(', ')}`,
            );
          }
          for (const p of chosen) {
            if (!p) continue;
            const bar = progressBar(`rebuild ${p.name}`, 0);
            const n = await rebuild(rt.db, p, ({ done, total }) => bar.update(done, total));
            bar.stop();
            err(`${p.name}: replayed ${n} events`);
          }
          return 0;
        }
        throw new UsageError('projections: expected status or rebuild');
      }
      case 'media': {
        const [sub, ...args] = rest;
        if (sub !== 'gc') throw new UsageError('media: expected gc');
        const { values } = parse(args, { 'dry-run': { type: 'boolean' }, 'grace-hours': { type: 'string' } });
        const [{ collectMedia, DEFAULT_MEDIA_GRACE_HOURS }, { createDirectoryMediaStore }, { progressBar }] =
          await Promise.all([
            import('../../infra/jobs/housekeeping.ts'),
            import('../../infra/media/store.ts'),
            import('./progress.ts'),
          ]);
        const graceHours = count('grace-hours', DEFAULT_MEDIA_GRACE_HOURS, values['grace-hours']);
        const rt = await open();
        const bar = progressBar('media gc', 0);
        const summary = await collectMedia({
          db: rt.db,
          media: createDirectoryMediaStore(config.MEDIA_DIR),
          now: () => new Date(),
          graceHours,
          dryRun: values['dry-run'] === true,
          onProgress: (scanned) => bar.update(scanned, scanned),
        }).finally(() => bar.stop());
        err(
          `${summary.scanned} file(s): ${summary.referenced} referenced, ${summary.young} stored within ` +
            `${graceHours} h, ${summary.removed} unreferenced ${summary.dryRun ? 'would be removed' : 'removed'} ` +
            `(${summary.removedBytes} bytes)`,
        );
        out(
          JSON.stringify({
            scanned: summary.scanned,
            referenced: summary.referenced,
            young: summary.young,
            removed: summary.removed,
            removed_bytes: summary.removedBytes,
            dry_run: summary.dryRun,
          }),
        );
        return 0;
      }
      case 'idempotency': {
        const [sub, ...args] = rest;
        if (sub !== 'purge') throw new UsageError('idempotency: expected purge');
        parse(args, {});
        const { purgeIdempotency } = await import('../../infra/jobs/housekeeping.ts');
        const rt = await open();
        const summary = await purgeIdempotency({ db: rt.db, now: () => new Date() });
        err(`${summary.purged} idempotency record(s) older than 24 hours deleted`);
        out(JSON.stringify(summary));
        return 0;
      }
      case 'jobs':
        return await jobsCommand(rest, config, open, out, err);
      case 'reports': {
        const [sub, ...args] = rest;
        if (sub !== 'make') throw new UsageError('reports: expected make');
        const { values } = parse(args, { period: { type: 'string' } });
        const { makeMonthlyReports } = await import('../application/reports.ts');
        const rt = await open();
        const summary = await makeMonthlyReports(
          { db: rt.db, commands: rt.commands, now: () => new Date() },
          values.period as string | undefined,
        );
        err(
          `${summary.period}: ${summary.made} report(s) made, ${summary.skipped} made already, ` +
            `of ${summary.sites} site(s)`,
        );
        out(JSON.stringify(summary));
        return 0;
      }
      case 'export': {
        const { values } = parse(rest, { to: { type: 'string' } });
        const to = required(values, 'to');
        const [{ exportCommand }, { projectors }] = await Promise.all([
          import('./operations.ts'),
          import('../../projections/index.ts'),
        ]);
        return await exportCommand(to, { config, projectors, holder, out, err });
      }
      case 'import': {
        const { values } = parse(rest, { from: { type: 'string' }, 'media-dir': { type: 'string' } });
        const from = required(values, 'from');
        const [{ importCommand }, { projectors }] = await Promise.all([
          import('./operations.ts'),
          import('../../projections/index.ts'),
        ]);
        const deps = { config, projectors, holder, out, err };
        return await importCommand(from, values['media-dir'], deps);
      }
      case 'move': {
        const { values } = parse(rest, { to: { type: 'string' }, 'media-dir': { type: 'string' } });
        const to = required(values, 'to');
        const [{ moveCommand }, { projectors }] = await Promise.all([
          import('./operations.ts'),
          import('../../projections/index.ts'),
        ]);
        const deps = { config, projectors, holder, out, err };
        return await moveCommand(to, values['media-dir'], deps);
      }
      default:
        throw new UsageError(`unknown command ${command}`);
    }
  } catch (error) {
    if (error instanceof UsageError) {
      err(`${error.message}\n\n${USAGE}`);
      return 2;
    }
    const { isDomainError } = await import('../../domain/errors.ts');
    if (isDomainError(error)) {
      err(`${error.code}: ${error.message}`);
      return 1;
    }
    // The database could not be opened: its folder is in use by another process, or cannot be written.
    if (error instanceof ConfigError) {
      err(error.message);
      return 1;
    }
    if (error instanceof Error && 'code' in error && error.code === 'ENOENT') {
      err(error.message);
      return 1;
    }
    throw error;
  } finally {
    await runtime?.close();
  }
}

const quietJobsLog = { info() {}, warn() {}, error() {}, debug() {} };

/** `jobs status|failed|retry`: the queues on Redis (REDIS_URL) and what the database says of the work. */
async function jobsCommand(
  args: string[],
  config: Config,
  open: () => Promise<Runtime>,
  out: (text: string) => void,
  err: (text: string) => void,
): Promise<number> {
  const [sub, ...rest] = args;
  const { values, positionals } = parse(rest, { json: { type: 'boolean' }, limit: { type: 'string' } });
  if (sub !== 'status' && sub !== 'failed' && sub !== 'retry') {
    throw new UsageError('jobs: expected status, failed or retry');
  }
  const jobs = config.REDIS_URL
    ? await (await import('../worker/background.ts')).openJobs(config, [], quietJobsLog)
    : undefined;
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
    const subscriptions = await subscriptionLag(rt, config);
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
async function subscriptionLag(rt: Runtime, config: Config): Promise<Array<{ name: string; lag: number }>> {
  const [{ modulesFor }, { createDirectoryMediaStore }, { lagOf }] = await Promise.all([
    import('../worker/modules.ts'),
    import('../../infra/media/store.ts'),
    import('../../infra/projection-runner.ts'),
  ]);
  const modules = modulesFor(config, {
    db: rt.db,
    commands: rt.commands,
    media: createDirectoryMediaStore(config.MEDIA_DIR),
    logger: quietJobsLog,
  })({
    add: async () => {
      throw new Error('the CLI adds no jobs here');
    },
  });
  const out: Array<{ name: string; lag: number }> = [];
  for (const sub of modules.flatMap((m) => m.subscriptions ?? [])) {
    out.push({ name: sub.name, lag: await lagOf(rt.db, sub) });
  }
  return out;
}

/** What waits in the database: webhook deliveries and scheduled articles. */
async function workBacklog(rt: Runtime) {
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
