import { describe, expect, it } from 'vitest';
import { catalogue } from '../../apps/server/mcp/server.ts';
import { mcpTools } from '../../apps/server/mcp/tools.ts';
import { EDIT_LIMIT_PER_DAY, REQUESTS_PER_MINUTE } from '../../domain/vocabulary.ts';

describe('the MCP catalogue (instructions and tool definitions)', () => {
  const WRITES = ['update_article', 'replace_featured_image', 'restore_revision'];

  it('states the limits as configured, in the instructions and in every tool whose call is an edit', () => {
    const { instructions, listed } = catalogue({ requestsPerMinute: 7, editsPerDay: 5 });
    expect(instructions).toContain('Limits: 7 requests per minute and 5 article edits per UTC day');
    for (const { tool, definition } of listed) {
      if (WRITES.includes(tool.name)) {
        expect(definition.description, tool.name).toMatch(
          / Counts as one of the account’s 5 article edits per UTC day\.$/,
        );
      } else {
        expect(definition.description, tool.name).not.toContain('edits per UTC day');
      }
      expect(definition.description, tool.name).not.toContain(`${EDIT_LIMIT_PER_DAY} article edits`);
    }
    expect(listed.map(({ tool }) => tool.name)).toEqual(mcpTools.map((tool) => tool.name));
  });

  it('states the defaults where nothing else is configured', () => {
    const { instructions } = catalogue({
      requestsPerMinute: REQUESTS_PER_MINUTE,
      editsPerDay: EDIT_LIMIT_PER_DAY,
    });
    expect(instructions).toContain('Limits: 60 requests per minute and 200 article edits per UTC day');
  });

  it('writes every nullable field as anyOf with a null branch, never a type array (strict tool-schema dialects refuse one)', () => {
    const { listed } = catalogue({ requestsPerMinute: 7, editsPerDay: 5 });
    const typeArrays: string[] = [];
    let nullBranches = 0;
    const walk = (node: unknown, path: string): void => {
      if (typeof node !== 'object' || node === null) return;
      const schema = node as Record<string, unknown>;
      if (Array.isArray(schema.type)) typeArrays.push(path);
      if (
        Array.isArray(schema.anyOf) &&
        schema.anyOf.some((b) => (b as { type?: unknown }).type === 'null')
      ) {
        nullBranches++;
      }
      for (const [key, value] of Object.entries(schema)) walk(value, `${path}.${key}`);
    };
    for (const { tool, definition } of listed) {
      walk(definition.inputSchema, `${tool.name}.input`);
      walk(definition.outputSchema, `${tool.name}.output`);
    }
    expect(typeArrays).toEqual([]);
    // get_article's target_keyword, among others: nullables are there, written as anyOf.
    expect(nullBranches).toBeGreaterThan(40);
  });
});
