import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type DefaultTreeAdapterMap, parse } from 'parse5';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  authorizeWithoutBrowser,
  browserless,
  freePort,
  PUBLIC_CLIENT,
  registerClient,
  startCallback,
  tokenRequest,
} from '../oauth/helpers.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { csrfOf } from '../support/inject-browser.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';

/*
 * One activity log for every face (the real server as a process): one write through the API, an
 * assistant (MCP, its token from the OAuth flow), each change the web pages make, a staff view and the
 * CLI; each is then in `GET /api/v1/activity` with its source, operation, status and the revision it
 * created, and on the `/activity` page, whose rows link that revision and whose `editor` and `web`
 * filters list the web pages' changes.
 */

type Seed = { account_id: string; email: string; password: string; api_key: string; sites: { id: string }[] };
type ActivityRecord = {
  source: string;
  actor: { type: string; id: string; name: string };
  operation: string;
  article_id: string | null;
  revision: number | null;
  status: number;
  request_id: string | null;
};
type Change = { revision: number; changed: boolean };

/** A write made through one face, and what its activity record must say. */
type Write = {
  face: string;
  source: 'api' | 'mcp' | 'editor' | 'web' | 'system';
  operation: string;
  status: number;
  actorType: string;
  articleId: string | null;
  /** The revision the write created (null: it changes no article). */
  revision: number | null;
  /** The request's id, as the answer's X-Request-Id said (null: not an HTTP request, or not seen). */
  requestId: string | null;
  /** The page's Who cell, where the test names it. */
  who?: string;
};

/** The page's labels (apps/server/web/activity.ts). */
const SOURCE_LABELS: Record<Write['source'], string> = {
  api: 'API',
  mcp: 'Assistant (MCP)',
  editor: 'Web editor',
  web: 'Web pages',
  system: 'Service',
};
const operationLabel = (operation: string): string => {
  const words = operation.replaceAll('_', ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
};

type Node = DefaultTreeAdapterMap['node'];
type Element = DefaultTreeAdapterMap['element'];
type Row = { cells: Record<string, string>; links: Record<string, string> };

const isElement = (n: Node): n is Element => 'tagName' in n;
const attr = (e: Element, name: string): string | undefined => e.attrs.find((a) => a.name === name)?.value;
function* elements(n: Node): Generator<Element> {
  if (isElement(n)) yield n;
  const children = 'childNodes' in n ? n.childNodes : [];
  for (const c of children) yield* elements(c);
}
function textOf(n: Node): string {
  if (n.nodeName === '#text') return (n as DefaultTreeAdapterMap['textNode']).value;
  return ('childNodes' in n ? n.childNodes : []).map(textOf).join('');
}

/** The `/activity` table's rows: each cell's text by its column's label, and each cell's link. */
function rowsOf(page: string): Row[] {
  const table = [...elements(parse(page))].find(
    (e) => e.tagName === 'table' && (attr(e, 'class') ?? '').split(' ').includes('activity-log'),
  );
  if (!table) return [];
  const rows = [...elements(table)].filter((e) => e.tagName === 'tr' && !isHeadRow(e));
  return rows.map((tr) => {
    const cells: Record<string, string> = {};
    const links: Record<string, string> = {};
    for (const td of [...elements(tr)].filter((e) => e.tagName === 'td')) {
      const label = attr(td, 'data-label') ?? '';
      cells[label] = textOf(td).replace(/\s+/g, ' ').trim();
      const a = [...elements(td)].find((e) => e.tagName === 'a');
      if (a) links[label] = attr(a, 'href') ?? '';
    }
    return { cells, links };
  });
}
const isHeadRow = (tr: Element): boolean => [...elements(tr)].some((e) => e.tagName === 'th');

describe('every face writes to one activity log', () => {
  let db: TestDatabase;
  let dir: string;
  let server: ServerProcess;
  let base: string;
  let env: Record<string, string>;
  let seed: Seed;
  /** The person's browser (the demo account), signed in. */
  let person: ReturnType<typeof browserless>;
  let articleId: string;
  let otherArticleId: string;
  const staff = { name: 'Sam Support', email: 'sam.support@example.com', password: 'support password 2026' };
  const writes: Write[] = [];

  const api = (path: string, init: RequestInit = {}): Promise<Response> =>
    fetch(`${base}/api/v1${path}`, {
      ...init,
      headers: {
        authorization: `Bearer ${seed.api_key}`,
        ...(init.body ? { 'content-type': 'application/json' } : {}),
        ...(init.headers ?? {}),
      },
    });
  /** Every record of the account's activity log, walking its pages. */
  async function activity(query = ''): Promise<ActivityRecord[]> {
    const records: ActivityRecord[] = [];
    for (let page = 1; ; page++) {
      const res = await api(`/activity?per_page=100&page=${page}${query}`);
      expect(res.status).toBe(200);
      const body = (await res.json()) as { data: ActivityRecord[]; meta: { total_pages: number } };
      records.push(...body.data);
      if (page >= body.meta.total_pages) return records;
    }
  }
  /** The records of a write: same source and operation, and its request id when known. */
  const recordsOf = (records: ActivityRecord[], w: Write): ActivityRecord[] =>
    records.filter(
      (r) =>
        r.source === w.source &&
        r.operation === w.operation &&
        (w.requestId === null || r.request_id === w.requestId),
    );
  /** Signs a fresh browser in on the sign-in page; the answer is the 303 of a signed-in person. */
  async function signIn(who: { email: string; password: string }): Promise<ReturnType<typeof browserless>> {
    const b = browserless(base);
    const form = await (await b.request('GET', '/sign-in')).text();
    const res = await b.request('POST', '/sign-in', {
      csrf: csrfOf(form),
      email: who.email,
      password: who.password,
    });
    expect(res.status).toBe(303);
    return b;
  }
  /** Posts a page's form as the person: the CSRF token from the page at `from`, then the form. */
  async function postForm(
    from: string,
    action: string,
    form: Record<string, string> = {},
  ): Promise<Response> {
    const page = await (await person.request('GET', from)).text();
    const res = await person.request('POST', action, { csrf: csrfOf(page), ...form }, { origin: base });
    await res.arrayBuffer();
    return res;
  }
  const requestIdOf = (res: Response): string => {
    const id = res.headers.get('x-request-id');
    expect(id).toMatch(/^req_/);
    return id as string;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cs-every-face-'));
    db = await createTestDatabase('postgres');
    env = { DATABASE_URL: db.databaseUrl as string, DATA_DIR: dir, MEDIA_DIR: join(dir, 'media') };
    const seeded = await cli(
      ['seed-demo', '--json', '--sites', '1', '--articles', '2', '--backlinks', '0', '--seed', '11'],
      env,
    );
    expect(seeded.code, seeded.stderr).toBe(0);
    seed = JSON.parse(seeded.stdout) as Seed;
    const made = await cli(
      ['staff', 'create', '--name', staff.name, '--email', staff.email, '--password', staff.password],
      env,
    );
    expect(made.code, made.stderr).toBe(0);
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    server = await startServer({ ...env, PORT: String(port), PUBLIC_URL: base });
    const list = (await (await api(`/sites/${seed.sites[0]?.id}/articles`)).json()) as {
      data: { id: string }[];
    };
    [articleId = '', otherArticleId = ''] = list.data.map((a) => a.id);
    person = await signIn(seed);
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('makes one write through the API', async () => {
    const edit = await api(`/articles/${articleId}`, {
      method: 'PUT',
      body: JSON.stringify({ title: 'Edited through the API' }),
    });
    expect(edit.status).toBe(200);
    const edited = (await edit.json()) as Change;
    expect(edited.changed).toBe(true);
    const byKey = { source: 'api', actorType: 'api_key' } as const;
    writes.push({
      ...byKey,
      face: 'API edit',
      operation: 'update_article',
      status: 200,
      articleId,
      revision: edited.revision,
      requestId: requestIdOf(edit),
    });

    const restore = await api(`/articles/${articleId}/revisions/1/restore`, {
      method: 'POST',
      body: JSON.stringify({ reason: 'Back to the first version' }),
    });
    expect(restore.status).toBe(200);
    const restored = (await restore.json()) as Change;
    expect(restored.revision).toBe(edited.revision + 1);
    writes.push({
      ...byKey,
      face: 'API restore',
      operation: 'restore_revision',
      status: 200,
      articleId,
      revision: restored.revision,
      requestId: requestIdOf(restore),
    });

    const hook = await api('/webhooks', {
      method: 'POST',
      body: JSON.stringify({ url: 'https://hooks.example.com/api', events: ['article.published'] }),
    });
    expect(hook.status).toBe(201);
    writes.push({
      ...byKey,
      face: 'API webhook',
      operation: 'create_webhook',
      status: 201,
      articleId: null,
      revision: null,
      requestId: requestIdOf(hook),
    });
  });

  let assistantClientId: string;

  it('makes one write through an assistant (MCP), with a token from the OAuth flow', async () => {
    const callback = await startCallback();
    try {
      const registered = await registerClient(base, {
        ...PUBLIC_CLIENT,
        client_name: 'Every Face Assistant',
        redirect_uris: [callback.url],
      });
      expect(registered.status).toBe(201);
      assistantClientId = ((await registered.json()) as { client_id: string }).client_id;
      const { back, verifier } = await authorizeWithoutBrowser({
        base,
        person: { accountId: seed.account_id, email: seed.email, password: seed.password, name: 'Demo' },
        clientId: assistantClientId,
        redirectUri: callback.url,
      });
      const tokens = await tokenRequest(base, {
        grant_type: 'authorization_code',
        code: back.searchParams.get('code') ?? '',
        redirect_uri: callback.url,
        client_id: assistantClientId,
        code_verifier: verifier,
        resource: `${base}/mcp`,
      });
      expect(tokens.status, JSON.stringify(tokens.body)).toBe(200);
      const client = new Client({ name: 'every-face', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${tokens.body.access_token}` } },
        }),
      );
      try {
        const result = (await client.callTool({
          name: 'update_article',
          arguments: { article_id: otherArticleId, title: 'Edited by an assistant' },
        })) as { isError?: boolean; structuredContent?: Change };
        expect(result.isError ?? false).toBe(false);
        const change = result.structuredContent as Change;
        expect(change.changed).toBe(true);
        writes.push({
          face: 'MCP edit',
          source: 'mcp',
          operation: 'update_article',
          status: 200,
          actorType: 'oauth_client',
          articleId: otherArticleId,
          revision: change.revision,
          requestId: null,
        });
      } finally {
        await client.close();
      }
    } finally {
      await callback.close();
    }
  });

  it('makes each change the web pages make', async () => {
    const editor = { source: 'editor', actorType: 'user', status: 200 } as const;
    const web = { source: 'web', actorType: 'user', status: 200, articleId: null, revision: null } as const;

    // The editor: the current body back with a new title; the answer goes to the saved revision.
    const current = (await (await api(`/articles/${articleId}`)).json()) as {
      body: string;
      revision: number;
    };
    const editPage = await (await person.request('GET', `/articles/${articleId}/edit`)).text();
    const edit = await person.request(
      'POST',
      `/articles/${articleId}/edit`,
      {
        csrf: csrfOf(editPage),
        expected_revision: String(current.revision),
        title: 'Edited on the web',
        body: current.body,
        reason: '',
      },
      { origin: base },
    );
    expect(edit.status).toBe(303);
    const saved = Number(/\?saved=(\d+)$/.exec(edit.headers.get('location') ?? '')?.[1]);
    expect(saved).toBe(current.revision + 1);
    writes.push({
      ...editor,
      face: 'web edit',
      operation: 'update_article',
      articleId,
      revision: saved,
      requestId: requestIdOf(edit),
    });

    const restore = await postForm(
      `/articles/${articleId}/revisions/1/restore`,
      `/articles/${articleId}/revisions/1/restore`,
      { expected_revision: String(saved), reason: 'The first title was better' },
    );
    expect(restore.status).toBe(303);
    const restored = Number(/\?restored=(\d+)$/.exec(restore.headers.get('location') ?? '')?.[1]);
    expect(restored).toBe(saved + 1);
    writes.push({
      ...editor,
      face: 'web restore',
      operation: 'restore_revision',
      articleId,
      revision: restored,
      requestId: requestIdOf(restore),
    });

    // Connect Site: a key made and revoked.
    const revokeForms = (page: string): string[] =>
      [...page.matchAll(/action="\/connect\/keys\/([^"/]+)\/revoke"/g)].map((m) => m[1] as string);
    const before = revokeForms(await (await person.request('GET', '/connect')).text());
    const createKey = await postForm('/connect', '/connect/keys', { name: 'Made on the web', scope: 'read' });
    // To the page (303), where the key is shown once.
    expect(createKey.status).toBe(303);
    writes.push({ ...web, face: 'web key', operation: 'create_api_key', requestId: requestIdOf(createKey) });
    const keyId = revokeForms(await (await person.request('GET', '/connect')).text()).find(
      (id) => !before.includes(id),
    );
    expect(keyId).toBeDefined();
    const revoke = await postForm('/connect', `/connect/keys/${keyId}/revoke`);
    expect(revoke.status).toBe(303);
    writes.push({ ...web, face: 'web revoke', operation: 'revoke_api_key', requestId: requestIdOf(revoke) });

    // Connect Site: a webhook endpoint added, disabled, deleted.
    const hookUrl = 'https://hooks.example.com/web';
    const createHook = await postForm('/connect', '/connect/webhooks', {
      url: hookUrl,
      'event.article.published': '1',
      description: 'Made on the web',
    });
    expect(createHook.status).toBe(303);
    writes.push({
      ...web,
      face: 'web webhook',
      operation: 'create_webhook',
      requestId: requestIdOf(createHook),
    });
    const endpoints = (await (await api('/webhooks')).json()) as { data: { id: string; url: string }[] };
    const hookId = endpoints.data.find((e) => e.url === hookUrl)?.id;
    expect(hookId).toMatch(/^whe_/);
    const disable = await postForm('/connect', `/connect/webhooks/${hookId}/disable`);
    expect(disable.status).toBe(303);
    writes.push({
      ...web,
      face: 'web disable',
      operation: 'update_webhook',
      requestId: requestIdOf(disable),
    });
    const remove = await postForm('/connect', `/connect/webhooks/${hookId}/delete`);
    expect(remove.status).toBe(303);
    writes.push({ ...web, face: 'web delete', operation: 'delete_webhook', requestId: requestIdOf(remove) });

    // Connect Site: the assistant connected above, disconnected.
    const disconnect = await postForm('/connect', `/connect/assistants/${assistantClientId}/disconnect`);
    expect(disconnect.status).toBe(303);
    writes.push({
      ...web,
      face: 'web disconnect',
      operation: 'disconnect_assistant',
      requestId: requestIdOf(disconnect),
    });

    // The password (this browser stays signed in under a new session).
    const password = 'a new password for the web 2026';
    const change = await postForm('/account/password', '/account/password', {
      current: seed.password,
      password,
      repeat: password,
    });
    expect(change.status).toBe(303);
    expect(change.headers.get('location')).toBe('/account/password?changed=1');
    writes.push({
      ...web,
      face: 'web password',
      operation: 'change_password',
      requestId: requestIdOf(change),
    });
  });

  it('makes one staff view and one CLI change', async () => {
    const support = await signIn(staff);
    const view = await support.request('GET', `/staff/accounts/${seed.account_id}`);
    expect(view.status).toBe(200);
    await view.arrayBuffer();
    writes.push({
      face: 'staff view',
      source: 'system',
      operation: 'staff_view',
      status: 200,
      actorType: 'staff',
      articleId: null,
      revision: null,
      requestId: requestIdOf(view),
      who: `${staff.name} support staff`,
    });

    const key = await cli(
      ['keys', 'create', '--account', seed.account_id, '--name', 'Made by the operator'],
      env,
    );
    expect(key.code, key.stderr).toBe(0);
    writes.push({
      face: 'CLI key',
      source: 'system',
      operation: 'create_api_key',
      status: 200,
      actorType: 'system',
      articleId: null,
      revision: null,
      requestId: null,
      who: 'Operator (CLI) service',
    });
  });

  it('lists every write in GET /api/v1/activity with its source, operation, status and revision', async () => {
    expect(writes.map((w) => w.face)).toHaveLength(15);
    // Records are stored in batches a moment after their answer.
    await expect
      .poll(
        async () => {
          const records = await activity();
          return writes.filter((w) => recordsOf(records, w).length === 0).map((w) => w.face);
        },
        { timeout: 20_000, interval: 100 },
      )
      .toEqual([]);
    const records = await activity();
    for (const w of writes) {
      const found = recordsOf(records, w);
      expect(found, w.face).toHaveLength(1);
      expect(found[0], w.face).toMatchObject({
        source: w.source,
        operation: w.operation,
        status: w.status,
        actor: { type: w.actorType },
        article_id: w.articleId,
        revision: w.revision,
      });
    }
    const operator = recordsOf(records, writes.find((w) => w.face === 'CLI key') as Write)[0];
    expect(operator?.actor).toEqual({ type: 'system', id: 'cli', name: 'Operator (CLI)' });
    expect(operator?.request_id).toBeNull();
    const assistant = recordsOf(records, writes.find((w) => w.face === 'MCP edit') as Write)[0];
    expect(assistant?.actor.id).toBe(assistantClientId);
    expect(assistant?.request_id).toMatch(/^req_/);
  });

  it('shows every write on the /activity page, linking the revision each article change created', async () => {
    for (const source of ['api', 'mcp', 'editor', 'web', 'system'] as const) {
      const res = await person.request('GET', `/activity?source=${source}&per_page=100`);
      expect(res.status).toBe(200);
      const rows = rowsOf(await res.text());
      for (const w of writes.filter((x) => x.source === source)) {
        const matching = rows.filter(
          (r) =>
            r.cells.Operation === operationLabel(w.operation) &&
            (w.requestId === null || r.cells['Request id']?.startsWith(w.requestId)),
        );
        expect(matching, w.face).toHaveLength(1);
        const [row] = matching as [Row];
        // What support staff did is "Support", the service's own work "Service".
        expect(row.cells.Source, w.face).toBe(w.actorType === 'staff' ? 'Support' : SOURCE_LABELS[w.source]);
        expect(row.cells.Status, w.face).toMatch(new RegExp(`^${w.status}( |$)`));
        if (w.who) expect(row.cells.Who, w.face).toBe(w.who);
        if (w.revision === null) {
          expect(row.cells.Revision, w.face).toBe('—');
        } else {
          // From the second revision on, the cell also links to its changes from the one before.
          expect(row.cells.Revision, w.face).toBe(
            w.revision > 1
              ? `Revision ${w.revision} Changes from revision ${w.revision - 1} to ${w.revision}`
              : `Revision ${w.revision}`,
          );
          expect(row.links.Revision, w.face).toBe(`/articles/${w.articleId}/revisions/${w.revision}`);
          expect(row.links.Article, w.face).toBe(`/articles/${w.articleId}`);
        }
      }
    }
  });

  it("lists the web pages' changes under the editor and web filters, and nothing else there", async () => {
    const ids = (rows: Row[]): string[] => rows.map((r) => r.cells['Request id'] ?? '').sort();
    const idsOf = (source: Write['source']): string[] =>
      writes
        .filter((w) => w.source === source)
        .map((w) => w.requestId ?? '')
        .sort();
    const editor = rowsOf(await (await person.request('GET', '/activity?source=editor')).text());
    expect(ids(editor)).toEqual(idsOf('editor'));
    expect(new Set(editor.map((r) => r.cells.Source))).toEqual(new Set(['Web editor']));
    const web = rowsOf(await (await person.request('GET', '/activity?source=web')).text());
    expect(ids(web)).toEqual(idsOf('web'));
    expect(new Set(web.map((r) => r.cells.Source))).toEqual(new Set(['Web pages']));
    // The API's filters agree.
    expect((await activity('&source=editor')).map((r) => r.request_id).sort()).toEqual(idsOf('editor'));
    expect((await activity('&source=web')).map((r) => r.request_id).sort()).toEqual(idsOf('web'));
  });
});
