import { bringAsyncUpToDate } from '../catch-up.ts';
import { type CliDeps, parse, required, UsageError } from '../command.ts';
import type { IngestKind } from '../ingest.ts';

/** `ingest KIND --file F.jsonl`: the pipeline's lines through the command handlers (apps/cli/ingest.ts). */
export async function run([kind, ...args]: string[], deps: CliDeps): Promise<number> {
  const { out, err } = deps;
  const { ingestFile, ingestKinds } = await import('../ingest.ts');
  if (!ingestKinds.includes(kind as IngestKind))
    throw new UsageError(`ingest: expected one of ${ingestKinds.join(', ')}`);
  const { values } = parse(args, { file: { type: 'string' }, account: { type: 'string' } });
  const file = required(values, 'file');
  const rt = await deps.open();
  const report = await ingestFile(rt.commands, kind as IngestKind, file, { account: values.account });
  await bringAsyncUpToDate(rt, deps);
  for (const f of report.failed) err(`${file === '-' ? 'stdin' : file}:${f.line}: ${f.error}`);
  err(`${report.applied} applied, ${report.unchanged} unchanged, ${report.failed.length} failed`);
  out(JSON.stringify(report));
  return report.failed.length > 0 ? 1 : 0;
}
