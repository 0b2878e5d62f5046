import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REGISTRATIONS_PER_HOUR } from '../../apps/server/oauth/mount.ts';
import {
  authorizeWithoutBrowser,
  createPerson,
  PUBLIC_CLIENT,
  registerClient,
  startCallback,
  startTestApp,
  type TestApp,
  tokenRequest,
} from './helpers.ts';

/*
 * The same authorization server on the embedded database (PGlite, one connection): a connection from
 * registration to disconnect; and the per-address limit on open registration.
 */

let t: TestApp;
let callback: Awaited<ReturnType<typeof startCallback>>;

beforeAll(async () => {
  callback = await startCallback();
  t = await startTestApp({ backend: 'pglite' });
});

afterAll(async () => {
  await t?.close();
  await callback?.close();
});

describe('on the embedded database', () => {
  it('connects an assistant, verifies its token, refreshes it and disconnects it', async () => {
    const person = await createPerson(t.runtime);
    const res = await registerClient(t.url, { ...PUBLIC_CLIENT, redirect_uris: [callback.url] });
    const { client_id: clientId } = (await res.json()) as { client_id: string };
    const { back, verifier } = await authorizeWithoutBrowser({
      base: t.url,
      person,
      clientId,
      redirectUri: callback.url,
      scope: 'content:read',
    });
    const tokens = await tokenRequest(t.url, {
      grant_type: 'authorization_code',
      code: back.searchParams.get('code') ?? '',
      redirect_uri: callback.url,
      client_id: clientId,
      code_verifier: verifier,
      resource: `${t.url}/mcp`,
    });
    expect(tokens.status).toBe(200);
    expect(await t.app.oauth.verifyMcpToken(tokens.body.access_token ?? '')).toMatchObject({
      accountId: person.accountId,
      scope: 'read',
    });
    const refreshed = await tokenRequest(t.url, {
      grant_type: 'refresh_token',
      refresh_token: tokens.body.refresh_token ?? '',
      client_id: clientId,
    });
    expect(refreshed.status).toBe(200);
    expect(await t.app.oauth.listConnectedClients(person.accountId)).toHaveLength(1);
    await t.app.oauth.disconnectClient(person.accountId, clientId);
    expect(await t.app.oauth.verifyMcpToken(refreshed.body.access_token ?? '')).toBeNull();
    expect(await t.app.oauth.listConnectedClients(person.accountId)).toEqual([]);
  });

  it(`limits open registration to ${REGISTRATIONS_PER_HOUR} clients per address per hour`, async () => {
    const statuses: number[] = [];
    for (let i = 0; i < REGISTRATIONS_PER_HOUR + 1; i++) {
      const res = await registerClient(t.url, { ...PUBLIC_CLIENT, redirect_uris: [callback.url] });
      statuses.push(res.status);
      if (res.status === 429) {
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
        expect(((await res.json()) as { error: string }).error).toBe('temporarily_unavailable');
      } else {
        await res.body?.cancel();
      }
    }
    // The first test registered one already.
    expect(statuses.filter((s) => s === 201)).toHaveLength(REGISTRATIONS_PER_HOUR - 1);
    expect(statuses.slice(-2)).toEqual([429, 429]);
  });
});
