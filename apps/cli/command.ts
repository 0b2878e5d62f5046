import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import type { DomainEvent } from '../../domain/events.ts';
import type { Config } from '../../infra/config.ts';
import type { Jobs } from '../../infra/jobs/queue.ts';
import type { AsyncProjector, Projector } from '../../infra/projection.ts';
import type { ApplicationDeps } from '../application/deps.ts';

/*
 * What a CLI command is (a row of the table in apps/cli/commands/index.ts and a module beside it) and
 * what it is given. A command loads what it uses when it runs (`await import`): `--help` and a usage
 * error load the table and nothing of the commands' modules, the database, the runtime or the
 * application.
 */

/** Where a command writes: results to `out` (stdout), everything else to `err` (stderr). */
export type CliIo = {
  out: (text: string) => void;
  err: (text: string) => void;
  /** Where `--password-stdin` reads from; process.stdin when not given. */
  stdin?: AsyncIterable<string | Buffer>;
};

/** What a command works with once its database is open: the use cases are made from it. */
export type CliRuntime = Pick<ApplicationDeps, 'db' | 'commands'>;

/** Every read model's projector (projections/), in the order a rebuild of everything runs them. */
export type ReadModels = {
  projectors: readonly Projector[];
  asyncProjectors: readonly Projector[];
  /** A projector by its name with or without the version (`articles` or `articles@1`). */
  findProjector(name: string): Projector | undefined;
};

/** What the composition root (apps/cli/cli.ts) plugs in: each loads what it needs when called. */
export type CliServices = {
  /**
   * Opens the database, applies the migrations not yet applied (unless `migrate` is false) and makes
   * the command handlers; what it opened is closed when the command returns. Default: migrations
   * applied, a pool of 4.
   */
  open(opts?: { migrate: boolean; poolSize: number }): Promise<CliRuntime>;
  readModels(): Promise<ReadModels>;
  /** The job queues on Redis (REDIS_URL), as the server's and the worker's are. */
  openQueues(): Promise<Jobs>;
  /** The checkpointed subscriptions that turn the log into jobs (webhooks@1, publishing@1). */
  logSubscriptions(rt: CliRuntime): Promise<readonly AsyncProjector<DomainEvent>[]>;
};

/** What a command is given: the configuration, its output and the services. */
export type CliDeps = CliServices &
  CliIo & {
    config: Config;
    /** What this process is, for the embedded database's lock (`the CLI command keys create (npm run cli)`). */
    holder: string;
  };

/** One form of a command in the usage text: what to type, and what it does (its lines as printed). */
export type UsageEntry = { synopsis: string; about?: readonly string[] };

/**
 * A command's module (apps/cli/commands/<name>.ts): reads its arguments (what follows its name) and
 * does its work; the exit code. A `UsageError` is said with the usage text (exit code 2), a
 * `DomainError` as `code: message` (exit code 1).
 */
export type CommandModule = { run(args: string[], deps: CliDeps): Promise<number> };

/**
 * One command of the CLI, a row of the table in apps/cli/commands/index.ts: its name, its forms in the
 * usage text, and its module, loaded only when it runs (`--help` loads the table alone).
 */
export type CliCommand = {
  /** The word after `npm run cli --`. */
  name: string;
  /** Its entries in the usage text, in order: one per form (`keys create`, `keys list`, ...). */
  usage: readonly UsageEntry[];
  /**
   * Whether a running server runs it for the CLI (apps/cli/through-server.ts), over the admin socket
   * in DATA_DIR, when the embedded database's folder is locked by that server. Such a command writes
   * nothing before it opens the database, and uses nothing of the services but `open`.
   */
  throughServer?: boolean;
  load(): Promise<CommandModule>;
};

/** Arguments the command does not take: said with the usage text, exit code 2. */
export class UsageError extends Error {}

/**
 * The options of `options` and the positionals in `args` (parseArgs' result, whose type node:util does
 * not export by name); an unknown option is a usage error.
 */
export function parse<const T extends ParseArgsOptionsConfig>(args: string[], options: T) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true } as const);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** The value of a required string option. */
export function required(values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`--${name} is required`);
  return v;
}

/** A whole-number option (`--sites N`), `fallback` when it is not given. */
export function count(name: string, fallback: number, value: string | undefined): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 10_000_000)
    throw new UsageError(`--${name} must be a whole number from 0 to 10000000`);
  return n;
}
