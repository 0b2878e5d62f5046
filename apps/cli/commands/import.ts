import { type CliDeps, parse, required } from '../command.ts';

/** `import --from FILE`: an export into an empty database, then every read model replayed (apps/cli/operations.ts). */
export async function run(
  args: string[],
  { config, holder, readModels, out, err }: CliDeps,
): Promise<number> {
  const { values } = parse(args, { from: { type: 'string' }, 'media-dir': { type: 'string' } });
  const from = required(values, 'from');
  const [{ runImport }, { projectors }] = await Promise.all([import('../operations.ts'), readModels()]);
  return await runImport(from, values['media-dir'], { config, projectors, holder, out, err });
}
