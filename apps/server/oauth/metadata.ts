import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { SCOPES } from '../http/oauth-port.ts';

/*
 * RFC 9728 protected resource metadata for /mcp, served path-aware
 * (`/.well-known/oauth-protected-resource/mcp`, the URL a 401 from /mcp points to) and at the root
 * (`/.well-known/oauth-protected-resource`) for clients that look there.
 */

const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource';

/** The URL the MCP endpoint names in `WWW-Authenticate: Bearer resource_metadata="..."`. */
export function resourceMetadataUrl(publicUrl: string): string {
  return `${publicUrl}${PROTECTED_RESOURCE_PATH}/mcp`;
}

const ProtectedResourceMetadata = z.object({
  resource: z.string(),
  authorization_servers: z.array(z.string()),
  scopes_supported: z.array(z.string()),
  bearer_methods_supported: z.array(z.string()),
  resource_name: z.string(),
});

export const protectedResourceMetadata: FastifyPluginAsyncZod<{
  publicUrl: string;
  resource: string;
}> = async (app, { publicUrl, resource }) => {
  const document: z.infer<typeof ProtectedResourceMetadata> = {
    resource,
    authorization_servers: [publicUrl],
    scopes_supported: [SCOPES.read, SCOPES.write],
    bearer_methods_supported: ['header'],
    resource_name: 'Content Service',
  };
  for (const url of [PROTECTED_RESOURCE_PATH, `${PROTECTED_RESOURCE_PATH}/mcp`]) {
    app.get(
      url,
      { schema: { hide: true, response: { 200: ProtectedResourceMetadata } } },
      async (_request, reply) =>
        reply
          .header('access-control-allow-origin', '*')
          .header('cache-control', 'public, max-age=300')
          .send(document),
    );
  }
};
