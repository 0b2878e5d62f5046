import type { CliCommand, UsageEntry } from '../command.ts';
import { accountsCommand } from './accounts.ts';
import { exportCommand } from './export.ts';
import { idempotencyCommand } from './idempotency.ts';
import { importCommand } from './import.ts';
import { ingestCommand } from './ingest.ts';
import { jobsCommand } from './jobs.ts';
import { keysCommand } from './keys.ts';
import { mediaCommand } from './media.ts';
import { migrateCommand } from './migrate.ts';
import { moveCommand } from './move.ts';
import { projectionsCommand } from './projections.ts';
import { reportsCommand } from './reports.ts';
import { seedDemoCommand } from './seed-demo.ts';
import { staffCommand } from './staff.ts';

/** The CLI's commands, in the order the usage text lists them; the dispatcher finds one by its name. */
export const commands: readonly CliCommand[] = [
  migrateCommand,
  seedDemoCommand,
  accountsCommand,
  keysCommand,
  staffCommand,
  ingestCommand,
  projectionsCommand,
  mediaCommand,
  idempotencyCommand,
  reportsCommand,
  jobsCommand,
  exportCommand,
  importCommand,
  moveCommand,
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
at a time: stop the server first), MEDIA_DIR, LOG_LEVEL, REDIS_URL and JOBS_PREFIX (the job queues;
unset REDIS_URL: they live in the server process).`;
