import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/*
 * The layering rules of docs/architecture.md, checked on every module's imports: dependencies point
 * one way (adapters -> application -> domain, with infra and projections plugged in below the
 * application), and a face imports only itself and what every face shares (apps/server/http), never
 * another face.
 */

const ROOT = resolve(import.meta.dirname, '..');
const SOURCE_DIRS = ['apps', 'domain', 'infra', 'projections'];

type Layer = 'domain' | 'infra' | 'projections' | 'application' | 'adapter' | 'composition';

/** The files that put the service together: they may see every layer. */
const COMPOSITION_ROOTS = new Set([
  'apps/server/main.js',
  'apps/server/serve.ts',
  'apps/server/start-modules.ts',
  'apps/server/compile-ahead.ts',
  'apps/server/app.ts',
  'apps/worker/main.js',
  'apps/worker/run.ts',
  'apps/cli/main.js',
  'apps/cli/cli.ts',
  'apps/runtime.ts',
]);

/**
 * The faces: each serves one kind of caller. A face imports itself, the shared HTTP layer, the
 * application, projections, infra and domain (as its layer allows), and the named ports below.
 */
const FACES = [
  'apps/server/api/',
  'apps/server/mcp/',
  'apps/server/oauth/',
  'apps/server/web/',
  'apps/server/media-routes.ts',
  'apps/cli/',
  'apps/worker/jobs/',
];
/** What every face of the server shares: it imports no face. */
const HTTP = 'apps/server/http/';
/** Files of a face that other faces may import: none (the ports are in apps/server/http). */
const NAMED_PORTS: readonly string[] = [];

function faceOf(file: string): string | null {
  return FACES.find((face) => file === face || file.startsWith(face)) ?? null;
}

function layerOf(file: string): Layer {
  if (COMPOSITION_ROOTS.has(file)) return 'composition';
  if (file.startsWith('domain/')) return 'domain';
  if (file.startsWith('infra/')) return 'infra';
  if (file.startsWith('projections/')) return 'projections';
  if (file.startsWith('apps/application/')) return 'application';
  return 'adapter';
}

/** What each layer may import (besides packages from node_modules and node: builtins). */
const ALLOWED: Record<Layer, readonly Layer[]> = {
  domain: ['domain'],
  infra: ['domain', 'infra'],
  projections: ['domain', 'infra', 'projections'],
  application: ['domain', 'infra', 'projections', 'application'],
  adapter: ['domain', 'infra', 'application', 'adapter'],
  composition: ['domain', 'infra', 'projections', 'application', 'adapter', 'composition'],
};

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|js)$/.test(e.name) && !e.name.endsWith('.d.ts'))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)));
}

/** The project files a module imports (static, type-only and dynamic imports alike). */
function importsOf(file: string): string[] {
  const info = ts.preProcessFile(readFileSync(join(ROOT, file), 'utf8'), true, true);
  return info.importedFiles
    .map((f) => f.fileName)
    .filter((name) => name.startsWith('.'))
    .map((name) => relative(ROOT, resolve(ROOT, dirname(file), name)));
}

const files = SOURCE_DIRS.flatMap(sourceFiles);
const edges = files.flatMap((from) => importsOf(from).map((to) => ({ from, to })));

describe('the layering of the source tree', () => {
  it('finds the modules and their imports', () => {
    // A scan that found nothing would pass every rule below.
    expect(files.length).toBeGreaterThan(100);
    expect(edges.length).toBeGreaterThan(300);
    expect(files).toContain('apps/application/index.ts');
  });

  it('points every import one way: adapters -> application -> projections and infra -> domain', () => {
    const wrong = edges
      .filter(({ from, to }) => !ALLOWED[layerOf(from)].includes(layerOf(to)))
      .map(({ from, to }) => `${from} (${layerOf(from)}) imports ${to} (${layerOf(to)})`);
    expect(wrong).toEqual([]);
  });

  it('keeps each face to its own routes: no module imports a route file of another directory', () => {
    const wrong = edges
      .filter(({ from, to }) => to.endsWith('-routes.ts') && dirname(from) !== dirname(to))
      .map(({ from, to }) => `${from} imports ${to}`);
    expect(wrong).toEqual([]);
  });

  it('finds every face and the shared HTTP layer', () => {
    for (const face of FACES) expect(files.some((f) => faceOf(f) === face)).toBe(true);
    expect(files.some((f) => f.startsWith(HTTP))).toBe(true);
  });

  it('keeps each face to itself: a face imports no other face, nor any adapter outside apps/server/http', () => {
    const wrong = edges
      .filter(({ from }) => faceOf(from) !== null && layerOf(from) === 'adapter')
      .filter(({ from, to }) => layerOf(to) === 'adapter' && faceOf(to) !== faceOf(from))
      .filter(({ to }) => !to.startsWith(HTTP) && !NAMED_PORTS.includes(to))
      .map(({ from, to }) => `${from} imports ${to}`);
    expect(wrong).toEqual([]);
  });

  it('keeps the shared HTTP layer below the faces: apps/server/http imports no face', () => {
    const wrong = edges
      .filter(({ from, to }) => from.startsWith(HTTP) && faceOf(to) !== null)
      .map(({ from, to }) => `${from} imports ${to}`);
    expect(wrong).toEqual([]);
  });

  it('has one activity recorder: only apps/application/activity.ts stores a call, every face goes through it', () => {
    // The command that appends records is called by the recorder alone; faces, staff views and the
    // CLI call `activity.record`.
    const wrong = files
      .filter((f) => !f.startsWith('apps/application/commands/') && f !== 'apps/application/activity.ts')
      .filter((f) => /\brecordCall\b|activity-batcher/.test(readFileSync(join(ROOT, f), 'utf8')))
      .sort();
    expect(wrong).toEqual([]);
    const recorders = files
      .filter((f) =>
        /\bactivity\.record\(|createActivity\(\w*\)\.record\(|createActivityLog\(|recordChanges\(/.test(
          readFileSync(join(ROOT, f), 'utf8'),
        ),
      )
      .sort();
    // The API and the web pages (one HTTP hook), MCP's tool calls, staff views, the CLI.
    for (const face of ['apps/server/api/', 'apps/server/web/', 'apps/server/mcp/', 'apps/cli/']) {
      expect(
        recorders.some((f) => f.startsWith(face)),
        face,
      ).toBe(true);
    }
    expect(recorders).toContain('apps/application/staff.ts');
  });

  it('keeps SQL out of the use cases: they reach storage through projections/ and infra/ (the command handlers excepted)', () => {
    // A query builder's statement or a `sql` template (typed or not, or its ref/lit/val/raw helpers).
    const buildsSql = /\b(selectFrom|insertInto|updateTable|deleteFrom)\(|\bsql(<[^`;]*>)?`|\bsql\.\w+\(/;
    const useCases = files.filter(
      (f) => layerOf(f) === 'application' && !f.startsWith('apps/application/commands/'),
    );
    expect(useCases).toContain('apps/application/webhooks.ts');
    const building = useCases.filter((f) => buildsSql.test(readFileSync(join(ROOT, f), 'utf8'))).sort();
    expect(building).toEqual([]);
  });

  it('keeps the domain free of module-level mutable state', () => {
    const wrong: string[] = [];
    for (const file of files.filter((f) => layerOf(f) === 'domain')) {
      const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
      lines.forEach((line, index) => {
        const mutable = /^(export )?(let|var) /.test(line);
        // A collection is mutable unless its type says it is read-only.
        const collection =
          /^(export )?const \w+(: [^=]+)? = new (Map|Set|WeakMap|WeakSet|Array)\b/.test(line) &&
          !/: Readonly(Set|Map)</.test(line);
        if (mutable || collection) {
          wrong.push(`${file}:${index + 1}: ${line.trim()}`);
        }
      });
    }
    expect(wrong).toEqual([]);
  });

  it('keeps a list endpoint with its tool and page to the 5 files docs/architecture.md walks through', () => {
    // The names that only listing a site's backlinks uses: the query, the request, the tool's input.
    const names = /\b(listBacklinks|BacklinkQuery|BacklinkListQuery|ListBacklinksInput|listBacklinksTool)\b/;
    const touching = files.filter((f) => names.test(readFileSync(join(ROOT, f), 'utf8'))).sort();
    const docs = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8');
    const walk =
      /\*\*A new list endpoint with its tool and page touches (\d+) production files\*\*[\s\S]*?\n\n((?:\d+\. [\s\S]*?\n)+)\n/.exec(
        docs,
      );
    expect(walk).not.toBeNull();
    const listed = [...(walk?.[2] ?? '').matchAll(/^\d+\. `([^`]+)`/gm)].map((m) => m[1]).sort();
    expect(Number(walk?.[1])).toBe(listed.length);
    expect(listed.length).toBeLessThanOrEqual(5);
    expect(touching).toEqual(listed);
  });

  it('writes each product limit once: no bound or stated limit as a number outside its constant', () => {
    // The product's limits are named constants of the domain (lengths, pages, revisions, edits and
    // requests a day or a minute, images); the configuration's own ranges are infra/config.ts's.
    const limits = new Map<number, string>();
    for (const f of files.filter((file) => file.startsWith('domain/'))) {
      for (const m of readFileSync(join(ROOT, f), 'utf8').matchAll(
        /^export const ([A-Z][A-Z0-9_]*) = ([0-9][0-9_]*);/gm,
      )) {
        const value = Number((m[2] as string).replaceAll('_', ''));
        if (value >= 10) limits.set(value, `${m[1]} (${f})`);
      }
    }
    expect(limits.size).toBeGreaterThan(10);
    const wrong: string[] = [];
    for (const f of files.filter((file) => file !== 'infra/config.ts')) {
      const text = readFileSync(join(ROOT, f), 'utf8');
      const lines = text.split('\n');
      lines.forEach((line, i) => {
        // A zod bound is a limit: it has a name.
        for (const m of line.matchAll(/(?<!Math)\.(max|length)\(\s*([0-9][0-9_]*)\s*[,)]/g)) {
          wrong.push(`${f}:${i + 1}: .${m[1]}(${m[2]})`);
        }
        // A limit stated in words: the number of its constant, written out.
        for (const m of line.matchAll(
          /\b([0-9][0-9_,]*) (requests|article edits|edits|characters|items|MiB|px|revisions)\b/g,
        )) {
          const value = Number((m[1] as string).replaceAll(/[_,]/g, ''));
          const name = limits.get(value);
          if (name && !/^\s*(\/\/|\*|\/\*)/.test(line)) wrong.push(`${f}:${i + 1}: "${m[0]}" is ${name}`);
        }
      });
    }
    expect(wrong).toEqual([]);
  });
});
