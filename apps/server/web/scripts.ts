import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { FastifyPluginAsync } from 'fastify';

/** Where `npm install` (apps/web-client/build.ts) leaves the bundled browser code. */
const STATIC_DIR = resolve(import.meta.dirname, 'static');

/** The browser scripts the pages load, by URL: only what the build makes, nothing else from disk. */
const SCRIPTS = { '/web/editor.js': 'editor.js' } as const;

/** Scripts committed as they are served, no build: the Copy buttons of a secret shown once. */
const OWN_SCRIPTS = { '/web/copy.js': resolve(import.meta.dirname, 'copy-button.js') } as const;

/**
 * Serves the bundled browser code. A bundle that was not built (`npm run build:web`) is a 404 and
 * one warning at start: the pages still work, as plain forms.
 */
export const webScripts: FastifyPluginAsync = async (app) => {
  for (const [url, file] of Object.entries(OWN_SCRIPTS)) {
    const code = await readFile(file);
    app.get(url, { schema: { hide: true } }, async (_request, reply) =>
      reply
        .type('text/javascript; charset=utf-8')
        .header('cache-control', 'public, max-age=300')
        .header('x-content-type-options', 'nosniff')
        .send(code),
    );
  }
  for (const [url, file] of Object.entries(SCRIPTS)) {
    const code = await readFile(resolve(STATIC_DIR, file)).catch(() => null);
    if (!code)
      app.log.warn({ file }, 'browser bundle missing: run `npm run build:web`; pages work without it');
    app.get(url, { schema: { hide: true } }, async (_request, reply) => {
      if (!code) return reply.status(404).type('text/plain').send('Not built');
      return reply
        .type('text/javascript; charset=utf-8')
        .header('cache-control', 'public, max-age=300')
        .header('x-content-type-options', 'nosniff')
        .send(code);
    });
  }
};
