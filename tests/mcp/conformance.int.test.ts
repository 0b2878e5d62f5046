import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type McpTestApp, startMcpTestApp } from '../support/mcp-app.ts';
import { startTokenProxy, type TokenProxy } from '../support/mcp-token-proxy.ts';
import { NODE, run } from '../support/process.ts';

/*
 * The MCP conformance suite (@modelcontextprotocol/conformance, its `server` mode) against a test
 * instance, offline: its CLI connects as an MCP client to the URL it is given. Its client cannot send
 * headers, so it talks to a test-only local proxy that adds a real token (one the test composition's
 * verifier knows) and forwards to /mcp; the product has no way in without a token.
 *
 * The scenarios that apply to this product server:
 * - server-initialize: the initialize handshake and the initialized notification;
 * - ping;
 * - tools-list: every tool has a name, a description and an input schema;
 * - dns-rebinding-protection: a request with a foreign Origin is refused (403), one from the service's
 *   own origin (PUBLIC_URL, here the proxy's address) is answered.
 * Not run, because they test fixtures of the suite's reference server rather than MCP behaviour this
 * server offers: the tools-call-* scenarios (they call test_simple_text, test_error_handling, ... tools),
 * json-schema-2020-12 and the elicitation-* scenarios (fixture tools), resources-* and prompts-* (no
 * resources or prompts here), completion-complete (completion of fixture prompts), logging-set-level (no
 * logging capability: the server answers Method not found, as it should), server-sse-polling and
 * server-sse-multiple-streams (sessions and SSE streams; this server is stateless with JSON responses).
 */

const SCENARIOS = ['server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection'];
const CLI = 'node_modules/@modelcontextprotocol/conformance/dist/index.js';

type Check = { id: string; status: string; errorMessage?: string };

describe('MCP conformance suite against /mcp', () => {
  let proxy: TokenProxy;
  let t: McpTestApp;
  let out: string;

  beforeAll(async () => {
    proxy = await startTokenProxy('mcp-test-token-a-write-0000000000000000');
    // The proxy's address is the service's public address: the Origin clients of this instance send.
    t = await startMcpTestApp({ publicUrl: proxy.url });
    proxy.forwardTo(t.url);
    out = await mkdtemp(join(tmpdir(), 'cs-mcp-conformance-'));
  });
  afterAll(async () => {
    await proxy?.close();
    await t?.close();
    if (out) await rm(out, { recursive: true, force: true });
  });

  it.each(SCENARIOS)('%s passes every check', async (scenario) => {
    const dir = join(out, scenario);
    const result = await run(NODE, [
      CLI,
      'server',
      '--url',
      `${proxy.url}/mcp`,
      '--scenario',
      scenario,
      '-o',
      dir,
    ]);
    const [runDir] = await readdir(dir);
    const checks = JSON.parse(await readFile(join(dir, runDir ?? '', 'checks.json'), 'utf8')) as Check[];
    expect(checks.length).toBeGreaterThan(0);
    for (const check of checks) {
      expect(check.status, `${check.id}: ${check.errorMessage ?? ''}`).toBe('SUCCESS');
    }
    expect(result.code, result.stdout).toBe(0);
  });
});
