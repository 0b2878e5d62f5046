import { type CliCommand, parse, UsageError } from '../command.ts';

/** `idempotency purge`: the Idempotency-Key records past their 24 hours deleted. */
export const idempotencyCommand: CliCommand = {
  name: 'idempotency',
  usage: [{ synopsis: 'idempotency purge', about: ['delete Idempotency-Key records older than 24 hours'] }],
  async run([sub, ...args], { open, out, err }) {
    if (sub !== 'purge') throw new UsageError('idempotency: expected purge');
    parse(args, {});
    const { purgeIdempotency } = await import('../../../infra/jobs/housekeeping.ts');
    const rt = await open();
    const summary = await purgeIdempotency({ db: rt.db, now: () => new Date() });
    err(`${summary.purged} idempotency record(s) older than 24 hours deleted`);
    out(JSON.stringify(summary));
    return 0;
  },
};
