import { type CliDeps, parse, required } from '../command.ts';

/** `export --to FILE`: the whole installation in one archive (apps/cli/operations.ts). */
export async function run(
  args: string[],
  { config, holder, readModels, out, err }: CliDeps,
): Promise<number> {
  const { values } = parse(args, { to: { type: 'string' } });
  const to = required(values, 'to');
  const [{ runExport }, { projectors }] = await Promise.all([import('../operations.ts'), readModels()]);
  return await runExport(to, { config, projectors, holder, out, err });
}
