import { type CliDeps, parse, UsageError } from '../command.ts';

/** `idempotency purge`: the Idempotency-Key records past their 24 hours deleted. */
export async function run([sub, ...args]: string[], { open, out, err }: CliDeps): Promise<number> {
  if (sub !== 'purge') throw new UsageError('idempotency: expected purge');
  parse(args, {});
  const { purgeIdempotency } = await import('../../../infra/jobs/housekeeping.ts');
  const rt = await open();
  const summary = await purgeIdempotency({ db: rt.db, now: () => new Date() });
  err(`${summary.purged} idempotency record(s) older than 24 hours deleted`);
  out(JSON.stringify(summary));
  return 0;
}
