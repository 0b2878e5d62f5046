import { type CliDeps, parse, UsageError } from '../command.ts';

/** `projections status|rebuild [NAME]`: the read models' lag, or one (or every) read model replayed. */
export async function run(
  [sub, ...args]: string[],
  { open, readModels, out, err }: CliDeps,
): Promise<number> {
  // Every argument is read before the database is opened: a usage error opens nothing.
  if (sub !== 'status' && sub !== 'rebuild') throw new UsageError('projections: expected status or rebuild');
  const { positionals } = parse(args, {});
  const [{ findProjector, projectors }, { projectionStatus, rebuild }, { progressBar }] = await Promise.all([
    readModels(),
    import('../../../infra/projection-runner.ts'),
    import('../progress.ts'),
  ]);
  if (sub === 'status') {
    const rt = await open();
    for (const s of await projectionStatus(rt.db, projectors)) {
      const cp = s.checkpoint
        ? `checkpoint ${s.checkpoint.transactionId}/${s.checkpoint.position}`
        : 'same transaction as the append';
      out(`${s.name.padEnd(16)} ${s.mode.padEnd(6)} lag ${String(s.lag).padStart(8)}  ${cp}`);
    }
    return 0;
  }
  const name = positionals[0];
  const chosen = name ? [findProjector(name)] : projectors;
  if (chosen.some((p) => p === undefined)) {
    throw new UsageError(`unknown projection ${name}; known: ${projectors.map((p) => p.name).join(', ')}`);
  }
  const rt = await open();
  for (const p of chosen) {
    if (!p) continue;
    const bar = progressBar(`rebuild ${p.name}`, 0);
    const n = await rebuild(rt.db, p, ({ done, total }) => bar.update(done, total));
    bar.stop();
    err(`${p.name}: replayed ${n} events`);
  }
  return 0;
}
