import { type CliCommand, parse, required } from '../command.ts';

/** `import --from FILE`: an export into an empty database, then every read model replayed (apps/cli/operations.ts). */
export const importCommand: CliCommand = {
  name: 'import',
  usage: [
    {
      synopsis: 'import --from FILE [--media-dir DIR]',
      about: ['an export into an empty database (checked whole first),', 'then every read model replayed'],
    },
  ],
  async run(args, { config, holder, readModels, out, err }) {
    const { values } = parse(args, { from: { type: 'string' }, 'media-dir': { type: 'string' } });
    const from = required(values, 'from');
    const [{ runImport }, { projectors }] = await Promise.all([import('../operations.ts'), readModels()]);
    return await runImport(from, values['media-dir'], { config, projectors, holder, out, err });
  },
};
