import { type CliDeps, parse, required } from '../command.ts';

/** `move --to postgres://...`: the embedded database to PostgreSQL in one step (apps/cli/operations.ts). */
export async function run(
  args: string[],
  { config, holder, readModels, out, err }: CliDeps,
): Promise<number> {
  const { values } = parse(args, { to: { type: 'string' }, 'media-dir': { type: 'string' } });
  const to = required(values, 'to');
  const [{ runMove }, { projectors }] = await Promise.all([import('../operations.ts'), readModels()]);
  return await runMove(to, values['media-dir'], { config, projectors, holder, out, err });
}
