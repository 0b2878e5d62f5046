import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '../..');
/** The pinned Node 24 (the one npm scripts run on). */
export const NODE = resolve(ROOT, 'node_modules/.bin/node');

type Run = { code: number | null; stdout: string; stderr: string };

/**
 * What every process a test starts inherits from the test's own environment: PATH, HOME and the
 * compile cache (tests/support/global-setup.ts), and nothing else.
 */
export function baseEnv(): Record<string, string | undefined> {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE,
  };
}

/** Runs a command to completion with a clean environment plus `env`; never throws on a non-zero exit. */
export function run(
  command: string,
  args: string[],
  env: Record<string, string | undefined> = {},
  input?: string,
): Promise<Run> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, {
      cwd: ROOT,
      env: {
        ...baseEnv(),
        PATH: `${resolve(ROOT, 'node_modules/.bin')}:${process.env.PATH ?? ''}`,
        LOG_LEVEL: 'warn',
        ...env,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolvePromise({ code, stdout, stderr }));
    // A command that exits without reading its input (pg_ctl, initdb) closes the pipe: no error of ours.
    child.stdin.on('error', () => {});
    child.stdin.end(input ?? '');
  });
}

/**
 * Node's arguments for the npm script `name` of the checkout at `root`, read from its package.json
 * (`cli`: `node --liftoff-only apps/cli/main.js`): the script as npm runs it, without npm's own start.
 */
export function scriptArgsOf(root: string, name: 'cli' | 'start'): string[] {
  const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const script = pkg.scripts[name] ?? '';
  const [command, ...args] = script.split(/\s+/);
  if (command !== 'node')
    throw new Error(`package.json's ${name} script does not start with node: ${script}`);
  return args;
}

/** Node's arguments for the CLI of the checkout at `root` (`scriptArgsOf(root, 'cli')`). */
export function cliArgsOf(root: string): string[] {
  return scriptArgsOf(root, 'cli');
}

/** This checkout's CLI arguments (`cliArgsOf`). */
export const CLI_ARGS: readonly string[] = cliArgsOf(ROOT);

/** `npm run cli -- ...` on the pinned Node, with `input` on its standard input. */
export function cli(args: string[], env: Record<string, string | undefined>, input?: string): Promise<Run> {
  return run(NODE, [...CLI_ARGS, ...args], env, input);
}
