import { type CliCommand, parse, required } from '../command.ts';

/** `move --to postgres://...`: the embedded database to PostgreSQL in one step (apps/cli/operations.ts). */
export const moveCommand: CliCommand = {
  name: 'move',
  usage: [
    {
      synopsis: 'move --to postgres://... [--media-dir DIR]',
      about: [
        'the embedded database in DATA_DIR to an empty PostgreSQL',
        'database, in one step (the server stopped)',
      ],
    },
  ],
  async run(args, { config, holder, readModels, out, err }) {
    const { values } = parse(args, { to: { type: 'string' }, 'media-dir': { type: 'string' } });
    const to = required(values, 'to');
    const [{ runMove }, { projectors }] = await Promise.all([import('../operations.ts'), readModels()]);
    return await runMove(to, values['media-dir'], { config, projectors, holder, out, err });
  },
};
