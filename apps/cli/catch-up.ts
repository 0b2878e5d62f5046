import type { CliDeps, CliRuntime } from './command.ts';

/**
 * The async read models (backlinks, statistics, activity) catch up before the command returns. A
 * transaction still appending to the log can hold events back (docs/architecture.md); past 20 s the
 * command says so and leaves them to the server's or worker's projectors.
 */
export async function bringAsyncUpToDate(
  rt: CliRuntime,
  deps: Pick<CliDeps, 'readModels' | 'err'>,
): Promise<void> {
  const [{ asyncProjectors }, { catchUp }, { progressBar }] = await Promise.all([
    deps.readModels(),
    import('../../infra/projection-runner.ts'),
    import('./progress.ts'),
  ]);
  for (const p of asyncProjectors) {
    const bar = progressBar(`project ${p.name}`, 0);
    try {
      await catchUp(rt.db, p, ({ done, total }) => bar.update(done, total), { timeoutMs: 20_000 });
    } catch (error) {
      deps.err(
        `${error instanceof Error ? error.message : String(error)}; the server's projectors will apply them`,
      );
    } finally {
      bar.stop();
    }
  }
}
