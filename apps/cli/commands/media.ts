import { type CliDeps, count, parse, UsageError } from '../command.ts';

/** `media gc`: stored images no revision refers to removed (or counted, with `--dry-run`). */
export async function run([sub, ...args]: string[], { config, open, out, err }: CliDeps): Promise<number> {
  if (sub !== 'gc') throw new UsageError('media: expected gc');
  const { values } = parse(args, { 'dry-run': { type: 'boolean' }, 'grace-hours': { type: 'string' } });
  const [{ collectMedia, DEFAULT_MEDIA_GRACE_HOURS }, { createDirectoryMediaStore }, { progressBar }] =
    await Promise.all([
      import('../../../infra/jobs/housekeeping.ts'),
      import('../../../infra/media/store.ts'),
      import('../progress.ts'),
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
