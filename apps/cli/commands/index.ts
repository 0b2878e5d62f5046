import type { CliCommand, UsageEntry } from '../command.ts';

/**
 * The CLI's commands, in the order the usage text lists them: each a name, its forms in the usage text,
 * and its module (`run`), loaded only when it runs, so that `--help` and a usage error load this table
 * alone. The dispatcher (apps/cli/dispatch.ts) finds a command by its name.
 */
export const commands: readonly CliCommand[] = [
  {
    name: 'migrate',
    usage: [{ synopsis: 'migrate', about: ['apply database migrations'] }],
    load: () => import('./migrate.ts'),
  },
  {
    name: 'seed-demo',
    usage: [
      {
        synopsis: 'seed-demo [--sites N] [--articles N] [--backlinks N] [--seed N] [--json]',
        about: ['a new demo account (counts per site; defaults 2, 12, 40)'],
      },
    ],
    load: () => import('./seed-demo.ts'),
  },
  {
    name: 'accounts',
    usage: [
      { synopsis: 'accounts create --name NAME --email EMAIL [--password P]' },
      {
        synopsis: 'accounts set-password --email EMAIL [--password-stdin]',
        about: [
          'a new password: read from stdin, or generated and printed;',
          'signs the account out of every browser',
        ],
      },
    ],
    throughServer: true,
    load: () => import('./accounts.ts'),
  },
  {
    name: 'keys',
    usage: [
      { synopsis: 'keys create --account ID [--name NAME] [--scope read|write]' },
      { synopsis: 'keys list --account ID' },
      { synopsis: 'keys revoke --account ID --key KEY_ID' },
    ],
    throughServer: true,
    load: () => import('./keys.ts'),
  },
  {
    name: 'staff',
    usage: [
      { synopsis: 'staff create --name NAME --email EMAIL [--password P]' },
      { synopsis: 'staff set-password --email EMAIL [--password-stdin]' },
    ],
    throughServer: true,
    load: () => import('./staff.ts'),
  },
  {
    name: 'ingest',
    usage: [
      {
        synopsis: 'ingest sites|articles|backlinks|rewrites --file F.jsonl [--account ID]',
        about: ['(--file - reads standard input)'],
      },
    ],
    load: () => import('./ingest.ts'),
  },
  {
    name: 'projections',
    usage: [
      { synopsis: 'projections status' },
      {
        synopsis: 'projections rebuild [NAME]',
        about: ['drop a read model and replay every event (all when no NAME)'],
      },
    ],
    load: () => import('./projections.ts'),
  },
  {
    name: 'media',
    usage: [
      {
        synopsis: 'media gc [--dry-run] [--grace-hours N]',
        about: ['remove stored images no revision refers to, stored more', 'than N hours ago (default 24)'],
      },
    ],
    load: () => import('./media.ts'),
  },
  {
    name: 'idempotency',
    usage: [{ synopsis: 'idempotency purge', about: ['delete Idempotency-Key records older than 24 hours'] }],
    load: () => import('./idempotency.ts'),
  },
  {
    name: 'reports',
    usage: [
      {
        synopsis: 'reports make [--period YYYY-MM]',
        about: [
          "each site's monthly report (default: last month) and its",
          'report.ready webhook; a report made already is kept',
        ],
      },
    ],
    load: () => import('./reports.ts'),
  },
  {
    name: 'jobs',
    usage: [
      {
        synopsis: 'jobs status [--json]',
        about: [
          'queue depth, failures, the oldest waiting job; the',
          "subscriptions' lag and the webhook backlog",
        ],
      },
      {
        synopsis: 'jobs failed [--limit N] [--json]',
        about: ['the jobs that failed every attempt (newest first)'],
      },
      { synopsis: 'jobs retry ID', about: ['run a failed job again'] },
    ],
    load: () => import('./jobs.ts'),
  },
  {
    name: 'export',
    usage: [
      {
        synopsis: 'export --to FILE',
        about: [
          'the whole installation (event log, credentials, images) in',
          'one archive, with a manifest of counts and checksums',
        ],
      },
    ],
    load: () => import('./export.ts'),
  },
  {
    name: 'import',
    usage: [
      {
        synopsis: 'import --from FILE [--media-dir DIR]',
        about: ['an export into an empty database (checked whole first),', 'then every read model replayed'],
      },
    ],
    load: () => import('./import.ts'),
  },
  {
    name: 'move',
    usage: [
      {
        synopsis: 'move --to postgres://... [--media-dir DIR]',
        about: [
          'the embedded database in DATA_DIR to an empty PostgreSQL',
          'database, in one step (the server stopped)',
        ],
      },
    ],
    load: () => import('./move.ts'),
  },
];

/** The command called `name`, if there is one. */
export function findCommand(name: string): CliCommand | undefined {
  return commands.find((command) => command.name === name);
}

/** Where a form's description starts: on its synopsis' line when the synopsis ends before it. */
const ABOUT_COLUMN = 44;

function usageLines({ synopsis, about = [] }: UsageEntry): string[] {
  const line = `  ${synopsis}`;
  const [first, ...more] = about;
  const indented = (text: string): string => `${' '.repeat(ABOUT_COLUMN)}${text}`;
  if (first === undefined) return [line];
  if (line.length < ABOUT_COLUMN) return [line.padEnd(ABOUT_COLUMN) + first, ...more.map(indented)];
  return [line, ...about.map(indented)];
}

/** What `--help` prints, and a usage error after its message. */
export const USAGE = `Usage: npm run cli -- <command> [options]

${commands
  .flatMap((command) => command.usage)
  .flatMap(usageLines)
  .join('\n')}

Environment: DATABASE_URL (unset: embedded PGlite in DATA_DIR, default ./data, which one process opens
at a time: stop the server first; accounts, keys and staff are run by a running server instead, through
its socket DATA_DIR/admin.sock), MEDIA_DIR, LOG_LEVEL, REDIS_URL and JOBS_PREFIX (the job queues;
unset REDIS_URL: they live in the server process).`;
