import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/*
 * Every repository path a comment or a doc names exists: a file moved or removed leaves no comment or
 * doc pointing at it. Paths are those starting with a top folder of the repository (`infra/db/open.ts`,
 * `tests/web/`); patterns (`<name>`, `*`) and files the build writes are not checked.
 */

const ROOT = resolve(import.meta.dirname, '..');
const TOP = ['apps', 'bench', 'docs', 'domain', 'infra', 'projections', 'reliability', 'tests'];
/** Written by the build or by runs, never committed. */
const GENERATED = ['apps/server/web/static/'];
const PATH = new RegExp(`(?<![\\w./<>*-])(?:${TOP.join('|')})/[\\w./-]*(?![\\w<>*{-])`, 'g');
const COMMENT = /\/\*[\s\S]*?\*\/|\/\/[^\n]*/g;

function filesUnder(dir: string, ext: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(ext))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)));
}

/** The paths named in `text`, with their line numbers. */
function pathsIn(text: string, offset: number, whole: string): { path: string; line: number }[] {
  return [...text.matchAll(PATH)].map((m) => ({
    path: m[0].replace(/[.]+$/, ''),
    line: whole.slice(0, offset + (m.index ?? 0)).split('\n').length,
  }));
}

function namedPaths(file: string): { path: string; line: number }[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  if (file.endsWith('.md')) return pathsIn(text, 0, text);
  return [...text.matchAll(COMMENT)].flatMap((c) => pathsIn(c[0], c.index ?? 0, text));
}

describe('paths named in comments and docs', () => {
  it('exist in the repository', () => {
    const files = [
      ...['apps', 'bench', 'domain', 'infra', 'projections', 'reliability', 'tests'].flatMap((d) =>
        filesUnder(d, '.ts'),
      ),
      ...filesUnder('docs', '.md'),
      'README.md',
    ];
    const missing = files.flatMap((file) =>
      namedPaths(file)
        .filter(({ path }) => !GENERATED.some((g) => path.startsWith(g)) && !existsSync(join(ROOT, path)))
        .map(({ path, line }) => `${file}:${line}: ${path}`),
    );
    expect(missing).toEqual([]);
  });
});
