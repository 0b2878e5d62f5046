import {
  type CompleteRequest,
  type CompleteResult,
  ProtocolError,
  ProtocolErrorCode,
  type Server,
} from '@modelcontextprotocol/server';
import { isId } from '../../../domain/input.ts';
import type { Outcome } from '../../application/call.ts';
import type { Suggested } from '../../application/suggestions.ts';
import { PROMPTS } from './prompts.ts';
import { type Recording, recorded, type Served } from './recorded.ts';
import { RESOURCE_TEMPLATES, SITE_URI } from './resources.ts';

/*
 * completion/complete: the values an argument of a prompt or a variable of a resource template may take,
 * from what has been typed. `site_id` by the site's name, domain or id; `article_id` by the article's
 * title or id (within the site when `site_id` is among the context's arguments); `period` in the forms
 * get_stats takes; `revision`, `from` and `to` by number, of the context's `article_id`. The suggestions
 * use cases answer (apps/application/suggestions.ts); another account's ids suggest nothing. Each
 * completion is recorded (operation `complete_<what>`).
 */

type Kind = 'site_id' | 'article_id' | 'period' | 'revision';

/** What an argument's values are, by its name. */
const KINDS: Record<string, Kind> = {
  site_id: 'site_id',
  article_id: 'article_id',
  period: 'period',
  revision: 'revision',
  from: 'revision',
  to: 'revision',
};

/** The arguments of each prompt and the variables of each template, by their reference. */
function argumentNames(ref: CompleteRequest['params']['ref']): readonly string[] | null {
  if (ref.type === 'ref/prompt') {
    const prompt = PROMPTS.find((p) => p.prompt.name === ref.name);
    return prompt ? (prompt.prompt.arguments ?? []).map((a) => a.name) : null;
  }
  const templates = [...RESOURCE_TEMPLATES.map((t) => t.uriTemplate), SITE_URI];
  const template = templates.find((t) => t === ref.uri);
  return template ? [...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1] as string) : null;
}

const nothing: Suggested = { values: [], total: 0 };

/** completion/complete on a request's server. */
export function registerCompletions(server: Server, served: Served): void {
  const { suggestions } = served.services.application;
  server.setRequestHandler('completion/complete', async (request): Promise<CompleteResult> => {
    const { ref, argument, context } = request.params;
    const names = argumentNames(ref);
    if (!names) {
      const what = ref.type === 'ref/prompt' ? `prompt ${ref.name}` : `resource template ${ref.uri}`;
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown ${what}`);
    }
    const kind = names.includes(argument.name) ? KINDS[argument.name] : undefined;
    const given = context?.arguments ?? {};
    const siteId = given.site_id || undefined;
    const articleId = given.article_id || undefined;
    const suggest = async ({ call, settle }: Recording): Promise<Suggested> => {
      const take = (outcome: Outcome<Suggested>): Suggested => settle(outcome);
      switch (kind) {
        case 'site_id':
          return take(await suggestions.sites(call, argument.value));
        case 'article_id':
          return take(await suggestions.articles(call, argument.value, siteId));
        case 'period':
          return take(await suggestions.periods(call, argument.value));
        case 'revision':
          return articleId ? take(await suggestions.revisions(call, articleId, argument.value)) : nothing;
        case undefined:
          return nothing;
        default: {
          const unknown: never = kind;
          throw new Error(`unknown argument kind ${String(unknown)}`);
        }
      }
    };
    // As a tool call's record names the ids it was given: only well-formed ones.
    const known = {
      siteId: kind === 'article_id' && isId(siteId) ? siteId : undefined,
      articleId: kind === 'revision' && isId(articleId) ? articleId : undefined,
    };
    const found = await recorded(served, `complete_${kind ?? 'argument'}`, known, suggest);
    return {
      completion: { values: found.values, total: found.total, hasMore: found.total > found.values.length },
    };
  });
}
