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
 * json-schema-2020-12 and the elicitation-* scenarios (fixture tools), resources-* and prompts-* (they read
 * the reference server's fixture resources and prompts, not this server's), completion-complete
 * (completion of fixture prompts), logging-set-level (no logging capability: the server answers Method
 * not found, as it should), server-sse-polling (its fixture tool test_reconnection, and POSTs answered as
 * SSE streams: this server answers POSTs with JSON). server-sse-multiple-streams runs: initialize starts a
 * session, and concurrent POSTs on it are each answered (with JSON, which the scenario allows).
 */

const SCENARIOS = [
  'server-initialize',
  'ping',
  'tools-list',
  'dns-rebinding-protection',
  'server-sse-multiple-streams',
];

/*
 * The 2026-07-28 era (the suite's `--spec-version 2026-07-28`), in the suite's versions that have it
 * (0.2.x):
 * - server-stateless: server/discover, requests without a handshake or session, the per-request envelope,
 *   the unsupported-version error;
 * - tools-list, dns-rebinding-protection: as above, in the modern era;
 * - caching: ttlMs and cacheScope on the cacheable results;
 * - http-header-validation: the Mcp-Method / MCP-Protocol-Version headers checked against the body.
 * Their checks that need the reference server's fixtures (diagnostic tools, prompts, resources, which this
 * server does not have) are not applicable and listed below; every other check must pass.
 */
const MODERN_SCENARIOS = [
  'server-stateless',
  'tools-list',
  'caching',
  'http-header-validation',
  'dns-rebinding-protection',
];
const NOT_APPLICABLE = new Set([
  'sep-2575-server-rejects-undeclared-capability',
  'sep-2575-missing-capability-http-400',
  'sep-2575-http-server-no-independent-requests-on-stream',
  'sep-2575-server-no-log-without-loglevel',
  'sep-2575-server-sends-prompts-list-changed-on-subscription',
  'sep-2575-server-sends-tools-list-changed-on-subscription',
  'sep-2549-prompts-list-caching-hints',
  'sep-2549-resources-list-caching-hints',
  'sep-2549-resources-templates-list-caching-hints',
  'sep-2549-resources-read-caching-hints',
]);

/** The suite's CLI: the pinned devDependency, or another build of it named by MCP_CONFORMANCE_CLI. */
const CLI = process.env.MCP_CONFORMANCE_CLI ?? 'node_modules/@modelcontextprotocol/conformance/dist/index.js';
/** Whether this version of the suite has scenarios for the 2026-07-28 revision. */
const hasModern = (await run(NODE, [CLI, 'list'])).stdout.includes('server-stateless');

type Check = { id: string; status: string; errorMessage?: string };
/** Statuses that are not a failure: informational lines stand beside the checks. */
const PASSING = new Set(['SUCCESS', 'INFO']);

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

  /** Runs one scenario; the checks that did not pass, and the CLI's exit. */
  async function scenario(name: string, era: string[]): Promise<{ failed: string[]; code: number | null }> {
    const dir = join(out, [name, ...era].join('-'));
    const result = await run(NODE, [
      CLI,
      'server',
      '--url',
      `${proxy.url}/mcp`,
      '--scenario',
      name,
      '-o',
      dir,
      ...era,
    ]);
    const [runDir] = await readdir(dir);
    const checks = JSON.parse(await readFile(join(dir, runDir ?? '', 'checks.json'), 'utf8')) as Check[];
    expect(checks.filter((c) => c.status === 'SUCCESS').length).toBeGreaterThan(0);
    const failed = checks
      .filter((c) => !PASSING.has(c.status) && !NOT_APPLICABLE.has(c.id))
      .map((c) => `${c.status} ${c.id}: ${c.errorMessage ?? ''}`);
    return { failed, code: result.code };
  }

  it.each(SCENARIOS)('2025 era: %s passes every check', async (name) => {
    const { failed, code } = await scenario(name, []);
    expect(failed).toEqual([]);
    expect(code).toBe(0);
  });

  it.skipIf(!hasModern).each(MODERN_SCENARIOS)(
    '2026-07-28 era: %s passes every check that applies here',
    async (name) => {
      const { failed } = await scenario(name, ['--spec-version', '2026-07-28']);
      // The CLI's exit counts the checks that are not applicable here too: the list above is the verdict.
      expect(failed).toEqual([]);
    },
  );
});
