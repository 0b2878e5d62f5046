import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { constants, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { ArchiveStaffMember } from '../../infra/archive/contents.ts';
import { ArchiveExists, type ArchiveProgress, exportInstallation } from '../../infra/archive/export.ts';
import type { Manifest } from '../../infra/archive/format.ts';
import {
  ArchiveRefused,
  describeContents,
  type ImportSummary,
  importArchive,
  TargetNotEmpty,
  type VerifiedArchive,
  verifyArchive,
} from '../../infra/archive/import.ts';
import { type Config, ConfigSchema } from '../../infra/config.ts';
import { migrateToLatest, pendingMigrations } from '../../infra/db/migrate.ts';
import { migrations } from '../../infra/db/migrations/index.ts';
import { type DbHandle, openDatabase } from '../../infra/db/open.ts';
import type { NewEvent } from '../../infra/event-store.ts';
import type { Projector } from '../../infra/projection.ts';
import { withoutPassword } from '../../infra/url-password.ts';
import { progressBar } from './progress.ts';

/*
 * The operations commands (docs/operations.md, "Export and import" and "Moving from the embedded
 * default to PostgreSQL"): `export --to FILE`, `import --from FILE`, `move --to postgres://...`. The
 * work is infra/archive/; these open the databases, show progress and say what happened. A refusal
 * (a bad archive, a target that is not empty, a source that needs migrating) is one line on stderr and
 * exit code 1, with nothing written.
 */

type Io = { out: (text: string) => void; err: (text: string) => void };

type OperationDeps = Io & {
  config: Config;
  /** Every read model's projector: an import replays them, an export leaves their checkpoints out. */
  projectors: readonly Projector<NewEvent>[];
  /** What this process is, for the embedded database's lock. */
  holder: string;
};

/** A refusal of an operation, said in one line; nothing was written. */
class Refused extends Error {}

/** A load stopped by a signal, rolled back; `code` is the exit code (128 + the signal's number). */
class Stopped extends Error {
  readonly code: number;
  constructor(message: string, code: number) {
    super(message);
    this.code = code;
  }
}

/**
 * Runs a load with SIGINT and SIGTERM asking it to stop through its signal (importArchive rolls back
 * and removes the images it wrote): the first is said on stderr; a second one exits at once (the
 * database rolls the open transaction back; a `.import-*` folder may stay in the media folder).
 */
async function stoppableBySignals<T>(
  err: (text: string) => void,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  const onSignal = (name: NodeJS.Signals): void => {
    const code = 128 + constants.signals[name];
    if (controller.signal.aborted) process.exit(code);
    err(`${name}: stopping; nothing of the import will be kept (${name} again to exit at once)`);
    controller.abort(
      new Stopped(
        `the import was stopped by ${name} and nothing of it was kept (its transaction rolled back, ` +
          'the images it wrote removed)',
        code,
      ),
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    return await work(controller.signal);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/** The newest migration this code knows: the schema an archive must be of. */
function latestSchema(): string {
  const names = Object.keys(migrations);
  return names[names.length - 1] as string;
}

/** One progress bar per stage, each stopped when the next stage starts. */
function stagedProgress(): { onProgress: ArchiveProgress; stop(): void } {
  let stage: string | undefined;
  let bar: ReturnType<typeof progressBar> | undefined;
  return {
    onProgress(name, done, total) {
      if (name !== stage) {
        bar?.stop();
        stage = name;
        bar = progressBar(name, total);
      }
      bar?.update(done, total);
    },
    stop() {
      bar?.stop();
      bar = undefined;
      stage = undefined;
    },
  };
}

/** The embedded database's folder must hold one (PGlite would make a new, empty one). */
function requireEmbeddedDatabase(dataDir: string): void {
  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    throw new Refused(
      `DATA_DIR=${JSON.stringify(dataDir)} holds no embedded database (no PG_VERSION file there): nothing to ` +
        'copy. Set DATA_DIR to the folder the server runs on, or DATABASE_URL for a PostgreSQL database.',
    );
  }
}

/** A source is read as it is: one that needs migrating is refused rather than changed. */
async function requireCurrentSchema(handle: DbHandle): Promise<void> {
  const pending = await pendingMigrations(handle.db);
  if (pending.length > 0) {
    throw new Refused(
      `the source database needs ${pending.length} migration(s) first (${pending.join(', ')}): run ` +
        '`npm run cli -- migrate` (or start the server once) with the same settings, then try again.',
    );
  }
}

function describe(counts: Record<string, number>): string {
  const keys = ['events', 'credentials', 'oauth_models', 'webhook_endpoints', 'webhook_deliveries', 'media'];
  return keys.map((k) => `${counts[k] ?? 0} ${k}`).join(', ');
}

/** The support staff an import brought, said so that an operator sees who can sign in to /staff. */
function describeStaff(staff: readonly ArchiveStaffMember[]): string {
  const list = staff.map((m) => `${m.email}${m.password ? '' : ' (no password)'}`).join(', ');
  return `support staff: ${staff.length}${staff.length > 0 ? ` (${list})` : ''}`;
}

/** Runs an operation, turning its refusals into one line on stderr and exit code 1. */
async function refusable(err: (text: string) => void, work: () => Promise<number>): Promise<number> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof Stopped) {
      err(error.message);
      return error.code;
    }
    if (
      error instanceof Refused ||
      error instanceof ArchiveRefused ||
      error instanceof TargetNotEmpty ||
      error instanceof ArchiveExists
    ) {
      err(error.message);
      return 1;
    }
    throw error;
  }
}

async function writeArchive(source: DbHandle, file: string, deps: OperationDeps): Promise<Manifest> {
  await requireCurrentSchema(source);
  const progress = stagedProgress();
  try {
    return await exportInstallation({
      db: source.db,
      backend: source.kind,
      file,
      mediaDir: deps.config.MEDIA_DIR,
      rebuilt: deps.projectors.map((p) => p.name),
      onProgress: progress.onProgress,
    });
  } finally {
    progress.stop();
  }
}

/**
 * Loads a verified archive into the open, migrated `target`, in one transaction: a failure leaves the
 * target as it was (and is said so, in one line).
 */
async function loadArchive(
  target: DbHandle,
  file: string,
  verified: VerifiedArchive,
  mediaDir: string,
  deps: OperationDeps,
): Promise<ImportSummary> {
  const progress = stagedProgress();
  try {
    return await stoppableBySignals(deps.err, (signal) =>
      importArchive({
        db: target.db,
        file,
        verified,
        mediaDir,
        projectors: deps.projectors,
        onProgress: progress.onProgress,
        signal,
      }),
    );
  } catch (error) {
    if (error instanceof ArchiveRefused || error instanceof TargetNotEmpty || error instanceof Stopped)
      throw error;
    throw new Refused(
      `the import failed and nothing of it was kept (its transaction rolled back, the images it wrote ` +
        `removed): ${error instanceof Error ? error.message : String(error)}`,
    );
  } finally {
    progress.stop();
  }
}

async function verify(file: string): Promise<VerifiedArchive> {
  const progress = stagedProgress();
  try {
    return await verifyArchive(file, { schema: latestSchema(), onProgress: progress.onProgress });
  } finally {
    progress.stop();
  }
}

/** Migrates the target and refuses it unless it is empty (the import checks again, in its transaction). */
async function prepareTarget(target: DbHandle, deps: OperationDeps): Promise<void> {
  await migrateToLatest(target.db);
  const contents = await describeContents(target.db, deps.projectors);
  if (contents.length > 0) throw new TargetNotEmpty(contents);
}

/** `export --to FILE`. */
export function runExport(file: string, deps: OperationDeps): Promise<number> {
  const { config, err, out } = deps;
  return refusable(err, async () => {
    if (!config.DATABASE_URL) requireEmbeddedDatabase(config.DATA_DIR);
    const source = await openSource(deps);
    try {
      const manifest = await writeArchive(source, file, deps);
      const bytes = (await stat(file)).size;
      err(`exported ${describe(manifest.counts)} to ${file} (${bytes} bytes)`);
      out(JSON.stringify({ file: resolve(file), bytes, schema: manifest.schema, counts: manifest.counts }));
      return 0;
    } finally {
      await source.close();
    }
  });
}

/** `import --from FILE [--media-dir DIR]`. */
export function runImport(file: string, mediaDir: string | undefined, deps: OperationDeps): Promise<number> {
  const { config, err, out } = deps;
  return refusable(err, async () => {
    // The whole archive is checked before the target is opened: a bad one writes nothing anywhere.
    const verified = await verify(file);
    const media = resolve(mediaDir ?? config.MEDIA_DIR);
    const target = await openDatabase({
      dataDir: config.DATA_DIR,
      holder: deps.holder,
      ...(config.DATABASE_URL ? { databaseUrl: config.DATABASE_URL } : {}),
      poolSize: 2,
    });
    try {
      await prepareTarget(target, deps);
      const summary = await loadArchive(target, file, verified, media, deps);
      err(
        `imported ${describe(summary.counts)} from ${file}; every read model replayed; ` +
          `images in ${media} (${summary.mediaWritten} written, ${summary.mediaPresent} there already)`,
      );
      err(describeStaff(verified.staff));
      out(
        JSON.stringify({
          database: config.DATABASE_URL ? withoutPassword(config.DATABASE_URL) : resolve(config.DATA_DIR),
          media_dir: media,
          counts: summary.counts,
          media_written: summary.mediaWritten,
          media_present: summary.mediaPresent,
          staff: verified.staff.map((m) => ({
            id: m.id,
            email: m.email,
            name: m.name,
            password: m.password,
          })),
        }),
      );
      return 0;
    } finally {
      await target.close();
    }
  });
}

function openSource(deps: OperationDeps): Promise<DbHandle> {
  const { config } = deps;
  return openDatabase({
    dataDir: config.DATA_DIR,
    holder: deps.holder,
    ...(config.DATABASE_URL ? { databaseUrl: config.DATABASE_URL } : {}),
    poolSize: 2,
  });
}

/** `move --to postgres://... [--media-dir DIR]`: the embedded database in DATA_DIR to PostgreSQL. */
export function runMove(to: string, mediaDir: string | undefined, deps: OperationDeps): Promise<number> {
  const { config, err, out } = deps;
  return refusable(err, async () => {
    const url = ConfigSchema.shape.DATABASE_URL.safeParse(to);
    if (!url.success || url.data === undefined) {
      throw new Refused(
        `--to ${JSON.stringify(withoutPassword(to))}: expected a postgres:// or postgresql:// URL`,
      );
    }
    if (config.DATABASE_URL) {
      throw new Refused(
        'move copies the embedded database in DATA_DIR to PostgreSQL, but DATABASE_URL is set (this installation ' +
          'already runs on PostgreSQL): unset DATABASE_URL for the move, or use export and import.',
      );
    }
    requireEmbeddedDatabase(config.DATA_DIR);
    const media = resolve(mediaDir ?? config.MEDIA_DIR);
    // The source is held (its lock) from the first look to the end: no server starts on it meanwhile.
    const source = await openSource(deps);
    let target: DbHandle | undefined;
    let dir: string | undefined;
    try {
      await requireCurrentSchema(source);
      try {
        target = await openDatabase({ databaseUrl: url.data, dataDir: config.DATA_DIR, poolSize: 2 });
      } catch (error) {
        throw new Refused(
          `cannot open the --to database ${withoutPassword(url.data)}: ${error instanceof Error ? error.message : String(error)}` +
            ' (create it first: createdb NAME)',
        );
      }
      await prepareTarget(target, deps);
      dir = await mkdtemp(join(tmpdir(), 'cs-move-'));
      const file = join(dir, 'installation.tar.gz');
      await writeArchive(source, file, deps);
      const verified = await verify(file);
      const summary = await loadArchive(target, file, verified, media, deps);
      const where = withoutPassword(url.data);
      err(`moved ${describe(summary.counts)} from DATA_DIR=${resolve(config.DATA_DIR)} to ${where}`);
      err(
        `images: ${summary.counts.media ?? 0} in ${media} (${summary.mediaWritten} copied there, ` +
          `${summary.mediaPresent} there already)`,
      );
      err('Next: start the service (and any worker) with');
      err(`  DATABASE_URL=${where}`);
      err(`  MEDIA_DIR=${media}`);
      err(
        `The embedded database in ${resolve(config.DATA_DIR)} is left as it was: keep it until the new ` +
          'installation is checked; do not start a server on it again, or it goes its own way.',
      );
      out(
        JSON.stringify({
          database_url: where,
          media_dir: media,
          counts: summary.counts,
          media_written: summary.mediaWritten,
          media_present: summary.mediaPresent,
        }),
      );
      return 0;
    } finally {
      if (dir) await rm(dir, { recursive: true, force: true });
      await target?.close();
      await source.close();
    }
  });
}
