import { type CliDeps, parse, UsageError } from '../command.ts';

/** `reports make`: each site's monthly report and its report.ready webhook, through the `reports` use case. */
export async function run([sub, ...args]: string[], { open, out, err }: CliDeps): Promise<number> {
  if (sub !== 'make') throw new UsageError('reports: expected make');
  const { values } = parse(args, { period: { type: 'string' } });
  const { makeMonthlyReports } = await import('../../application/reports.ts');
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
