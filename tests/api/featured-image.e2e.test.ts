import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { recordingClient } from '../support/http.ts';
import { makeCertificate } from '../support/media.ts';
import { loadOpenApi, validateResponse } from '../support/openapi.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';

type Seed = { account_id: string; api_key: string; sites: { id: string }[] };
type Change = {
  revision: number;
  changed: boolean;
  featured_image: { url: string; alt: string; width: number; height: number } | null;
};

/** The image host: a local HTTPS server on 127.0.0.2, trusted by the service through MEDIA_FETCH_CA_FILE and OUTBOUND_ALLOW_NETWORKS. */
const IMAGE_HOST = '127.0.0.2';

async function listFiles(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir, { recursive: true, withFileTypes: true }))
      .filter((e) => e.isFile())
      .map((e) => e.name);
  } catch {
    return [];
  }
}

describe('featured images through a real server', () => {
  let db: TestDatabase;
  let dir: string;
  let server: ServerProcess;
  let images: Server;
  let imagesOrigin: string;
  let a: Seed;
  let client: ReturnType<typeof recordingClient>;
  let articleIds: string[];
  let png: Buffer;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cs-images-'));
    makeCertificate(dir, IMAGE_HOST);
    png = await sharp({ create: { width: 640, height: 360, channels: 3, background: '#3366cc' } })
      .png()
      .toBuffer();
    const svg = Buffer.from(
      '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><rect width="10" height="10"/></svg>',
    );
    images = createServer(
      { key: await readFile(join(dir, 'key.pem')), cert: await readFile(join(dir, 'cert.pem')) },
      (req, res) => {
        const port = (images.address() as { port: number }).port;
        if (req.url === '/photo.png') return res.writeHead(200, { 'content-type': 'image/png' }).end(png);
        if (req.url === '/drawing.png') return res.writeHead(200, { 'content-type': 'image/png' }).end(svg);
        if (req.url === '/to-loopback')
          return res.writeHead(302, { location: `https://127.0.0.1:${port}/photo.png` }).end();
        if (req.url === '/to-http')
          return res.writeHead(302, { location: `http://${IMAGE_HOST}:${port}/photo.png` }).end();
        if (req.url?.startsWith('/hop/')) {
          const n = Number(req.url.slice(5));
          return res.writeHead(302, { location: n > 0 ? `/hop/${n - 1}` : '/photo.png' }).end();
        }
        res.writeHead(404).end();
      },
    );
    await new Promise<void>((resolve) => images.listen(0, IMAGE_HOST, resolve));
    imagesOrigin = `https://${IMAGE_HOST}:${(images.address() as { port: number }).port}`;

    db = await createTestDatabase('postgres');
    const env = { DATABASE_URL: db.databaseUrl as string, DATA_DIR: dir };
    const seeded = await cli(
      ['seed-demo', '--json', '--sites', '1', '--articles', '4', '--backlinks', '0'],
      env,
    );
    a = JSON.parse(seeded.stdout) as Seed;
    server = await startServer({
      ...env,
      PUBLIC_URL: 'https://content.example.test',
      RATE_LIMIT_PER_MINUTE: '100000',
      MEDIA_FETCH_CA_FILE: join(dir, 'cert.pem'),
      OUTBOUND_ALLOW_NETWORKS: `${IMAGE_HOST}/32`,
    });
    client = recordingClient(server.url);
    const list = (await client.get(`/api/v1/sites/${a.sites[0]?.id}/articles`, a.api_key)).body as {
      data: { id: string }[];
    };
    articleIds = list.data.map((x) => x.id);
  });
  afterAll(async () => {
    await server?.stop();
    images?.close();
    await db?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  const upload = async (
    id: string,
    file: Blob,
    name = 'image',
    extra: Record<string, string> = { alt: 'A blue square' },
  ) => {
    const form = new FormData();
    form.append(name, file, 'upload.png');
    for (const [k, v] of Object.entries(extra)) form.append(k, v);
    const res = await fetch(`${server.url}/api/v1/articles/${id}/featured-image`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.api_key}` },
      body: form,
    });
    const body = await res.json();
    const headers = Object.fromEntries(res.headers.entries());
    client.recorded.push({
      method: 'POST',
      path: `/api/v1/articles/${id}/featured-image`,
      status: res.status,
      headers,
      body,
    });
    return { status: res.status, body, headers };
  };
  const fromUrl = (id: string, url: string) =>
    client.call('POST', `/api/v1/articles/${id}/featured-image`, {
      key: a.api_key,
      body: { url, alt: 'From a URL' },
    });
  const revisionOf = async (id: string): Promise<number> =>
    ((await client.get(`/api/v1/articles/${id}`, a.api_key)).body as { revision: number }).revision;

  it('accepts a multipart upload: a new revision, the image stored and served from /media', async () => {
    const id = articleIds[0] as string;
    const r = await upload(id, new Blob([png], { type: 'application/octet-stream' }));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const change = r.body as Change;
    expect(change).toMatchObject({
      changed: true,
      revision: 2,
      featured_image: { alt: 'A blue square', width: 640, height: 360 },
    });
    expect(change.featured_image?.url).toMatch(
      /^https:\/\/content\.example\.test\/media\/[0-9a-f]{64}\.png$/,
    );
    const path = new URL(change.featured_image?.url as string).pathname;
    const served = await fetch(`${server.url}${path}`);
    expect(served.status).toBe(200);
    expect(served.headers.get('content-type')).toBe('image/png');
    expect(served.headers.get('cache-control')).toContain('immutable');
    expect(Buffer.from(await served.arrayBuffer()).equals(png)).toBe(true);
    const revisions = (await client.get(`/api/v1/articles/${id}/revisions`, a.api_key)).body as {
      data: { origin: string }[];
    };
    expect(revisions.data[0]?.origin).toBe('api');
  });

  it('fetches from an https URL, following redirects up to 3', async () => {
    const id = articleIds[1] as string;
    const r = await fromUrl(id, `${imagesOrigin}/hop/2`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ featured_image: { alt: 'From a URL', width: 640, height: 360 } });
  });

  it.each([
    ['plain http', () => `http://${IMAGE_HOST}/photo.png`],
    ['a numeric loopback host', () => 'https://127.1/photo.png'],
    ['IPv6 loopback', () => 'https://[::1]/photo.png'],
    ['an IPv4-mapped metadata address', () => 'https://[::ffff:169.254.169.254]/latest/meta-data'],
    ['a decimal loopback host', () => 'https://2130706433/photo.png'],
    ['a hostname that resolves to loopback', () => 'https://localhost/photo.png'],
    ['a redirect to a private address', () => `${imagesOrigin}/to-loopback`],
    ['a redirect to http', () => `${imagesOrigin}/to-http`],
    ['more than 3 redirects', () => `${imagesOrigin}/hop/3`],
  ])('refuses %s with 422 image_fetch_failed, storing nothing', async (_name, url) => {
    const id = articleIds[2] as string;
    const before = await revisionOf(id);
    const media = await listFiles(join(dir, 'media'));
    const r = await fromUrl(id, url());
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({ code: 'image_fetch_failed' });
    expect(await revisionOf(id)).toBe(before);
    expect(await listFiles(join(dir, 'media'))).toEqual(media);
  });

  it('answers a host that does not resolve as one that is not public, and says which only in the log', async () => {
    const id = articleIds[2] as string;
    const unknown = await fromUrl(id, 'https://no-such-host.invalid/photo.png');
    const loopback = await fromUrl(id, 'https://localhost/photo.png');
    expect(unknown.status).toBe(422);
    const detail = (r: { body: unknown }) => (r.body as { code: string; detail: string }).detail;
    expect(detail(unknown)).toBe(detail(loopback));
    expect(detail(unknown)).not.toMatch(/resolv|loopback|private|127\.0\.0\.1|no-such-host/);
    const refused = (await server.logsNow())
      .filter((line) => line.includes('"request refused"'))
      .map((line) => JSON.parse(line) as { code: string; cause: string });
    expect(refused).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          code: 'image_fetch_failed',
          cause: expect.stringMatching(/no-such-host\.invalid could not be resolved/),
        }),
        expect.objectContaining({
          code: 'image_fetch_failed',
          cause: expect.stringMatching(/localhost is at .*not an allowed/),
        }),
      ]),
    );
  });

  it('refuses SVG, also named .png or served as image/png, and HTML pretending to be PNG (415)', async () => {
    const id = articleIds[3] as string;
    const svg = '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>';
    expect((await upload(id, new Blob([svg], { type: 'image/png' }))).status).toBe(415);
    expect(
      (await upload(id, new Blob(['<!doctype html><html><body>hi</body></html>'], { type: 'image/png' })))
        .status,
    ).toBe(415);
    const fetched = await fromUrl(id, `${imagesOrigin}/drawing.png`);
    expect(fetched.status).toBe(415);
    expect(fetched.body).toMatchObject({ code: 'unsupported_image' });
    expect(await revisionOf(id)).toBe(1);
  });

  it('refuses an image over 10 MiB and one over 8000 px (413)', async () => {
    const id = articleIds[3] as string;
    const big = await upload(id, new Blob([png, Buffer.alloc(10 * 1024 * 1024)]));
    expect(big.status).toBe(413);
    expect(big.body).toMatchObject({ code: 'image_too_large' });
    const wide = await sharp({ create: { width: 8001, height: 2, channels: 3, background: '#000' } })
      .png()
      .toBuffer();
    const tooWide = await upload(id, new Blob([wide]));
    expect(tooWide.status).toBe(413);
    expect(await revisionOf(id)).toBe(1);
  });

  it('refuses forms without an image part, with an unknown part, and JSON without a url (400)', async () => {
    const id = articleIds[3] as string;
    expect((await upload(id, new Blob([png]), 'picture')).status).toBe(400);
    expect((await upload(id, new Blob([png]), 'image', { colour: 'blue' })).status).toBe(400);
    const noUrl = await client.call('POST', `/api/v1/articles/${id}/featured-image`, {
      key: a.api_key,
      body: { alt: 'x' },
    });
    expect(noUrl.status).toBe(400);
    expect(await revisionOf(id)).toBe(1);
  });

  it('every response received above matches the OpenAPI document', async () => {
    const doc = await loadOpenApi(server.url);
    const api = client.recorded.filter((r) => r.path.startsWith('/api/v1/'));
    expect(api.flatMap((r) => validateResponse(doc, r))).toEqual([]);
    const op = (
      doc as { paths: Record<string, { post?: { requestBody?: { content: Record<string, unknown> } } }> }
    ).paths['/api/v1/articles/{id}/featured-image'];
    expect(Object.keys(op?.post?.requestBody?.content ?? {}).sort()).toEqual([
      'application/json',
      'multipart/form-data',
    ]);
  });
});
