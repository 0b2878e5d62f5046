import type { Runtime } from '../runtime.ts';
import type { CliIo } from './command.ts';
import { dispatch, type Wiring } from './dispatch.ts';

/*
 * The CLI's composition root: what its commands (apps/cli/commands/, a table) are given, and nothing
 * else. Each service loads its part of the service when a command first calls it (`await import`):
 * `--help` and a usage error load nothing of the database, the runtime, the read models or the
 * worker, and a command only its own part of them.
 */

const quietJobsLog = { info() {}, warn() {}, error() {}, debug() {} };

const wire: Wiring = (config, holder) => {
  let runtime: Runtime | undefined;
  return {
    services: {
      async open(opts = { migrate: true, poolSize: 4 }) {
        const { openRuntime } = await import('../runtime.ts');
        runtime = await openRuntime(config, { ...opts, holder, searchLanguage: config.SEARCH_LANGUAGE });
        return runtime;
      },
      async readModels() {
        // The read models with the configured search language: a rebuild or an import writes the
        // articles' search vectors with it, as the server does.
        const { createProjectors } = await import('../../projections/index.ts');
        const projectors = createProjectors({ searchLanguage: config.SEARCH_LANGUAGE });
        return {
          projectors,
          asyncProjectors: projectors.filter((p) => p.mode === 'async'),
          findProjector: (name: string) =>
            projectors.find((p) => p.name === name || p.name.split('@')[0] === name),
        };
      },
      async openQueues() {
        const { openJobs } = await import('../worker/background.ts');
        return openJobs(config, [], quietJobsLog);
      },
      async logSubscriptions(rt) {
        const [{ modulesFor }, { createDirectoryMediaStore }] = await Promise.all([
          import('../worker/modules.ts'),
          import('../../infra/media/store.ts'),
        ]);
        const modules = modulesFor(config, {
          db: rt.db,
          commands: rt.commands,
          media: createDirectoryMediaStore(config.MEDIA_DIR),
          logger: quietJobsLog,
        })({
          add: async () => {
            throw new Error('the CLI adds no jobs here');
          },
        });
        return modules.flatMap((m) => m.subscriptions ?? []);
      },
    },
    close: async () => {
      await runtime?.close();
    },
  };
};

/** Runs one CLI command; returns the exit code. Results go to `out` (stdout), everything else to `err`. */
export function runCli(argv: string[], env: NodeJS.ProcessEnv = process.env, io?: CliIo): Promise<number> {
  return dispatch(
    argv,
    env,
    io ?? {
      out: (t: string) => process.stdout.write(`${t}\n`),
      err: (t: string) => process.stderr.write(`${t}\n`),
    },
    wire,
  );
}
