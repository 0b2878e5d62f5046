import { mkdir } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { build } from 'esbuild';

/*
 * Bundles the browser code of the web pages (apps/web-client/) into apps/server/web/static/, where
 * the server serves it from /web/. Runs on `npm install` (postinstall) and `npm run build:web`; the
 * output is not kept in git. Pages work without it (the editor is then the plain form).
 */

const ROOT = resolve(import.meta.dirname, '../..');
export const WEB_STATIC_DIR = resolve(ROOT, 'apps/server/web/static');

const outfile = resolve(WEB_STATIC_DIR, 'editor.js');
await mkdir(dirname(outfile), { recursive: true });
const result = await build({
  entryPoints: [resolve(import.meta.dirname, 'editor.ts')],
  bundle: true,
  format: 'esm',
  target: 'es2022',
  minify: true,
  legalComments: 'linked',
  outfile,
  logLevel: 'warning',
});
if (result.errors.length > 0) process.exit(1);
console.log(`built ${outfile}`);
