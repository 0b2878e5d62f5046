import { type CliCommand, parse, required } from '../command.ts';

/** `export --to FILE`: the whole installation in one archive (apps/cli/operations.ts). */
export const exportCommand: CliCommand = {
  name: 'export',
  usage: [
    {
      synopsis: 'export --to FILE',
      about: [
        'the whole installation (event log, credentials, images) in',
        'one archive, with a manifest of counts and checksums',
      ],
    },
  ],
  async run(args, { config, holder, readModels, out, err }) {
    const { values } = parse(args, { to: { type: 'string' } });
    const to = required(values, 'to');
    const [{ runExport }, { projectors }] = await Promise.all([import('../operations.ts'), readModels()]);
    return await runExport(to, { config, projectors, holder, out, err });
  },
};
