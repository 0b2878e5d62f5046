import { inSpan, noteError } from '../../infra/telemetry/spans.ts';
import type { Call, Outcome } from './call.ts';

/**
 * Runs a use case as a span named `name` (`articles.edit`): under the face's request span, over the
 * command's decide and append spans. What it names comes from the call and, once it has run, from its
 * outcome: the account, the face (origin) and kind of actor, the site, article and revision it touched,
 * and a refusal's code as `error.type`. Ids only: never a body, a key or a secret. Tracing off: the use
 * case and nothing else.
 */
export function inUseCase<T>(name: string, call: Call, run: () => Promise<Outcome<T>>): Promise<Outcome<T>> {
  return inSpan(
    name,
    {
      attributes: () => ({
        'content_service.account.id': call.principal.accountId,
        'content_service.origin': call.principal.origin,
        'content_service.actor.type': call.principal.actor.type,
      }),
    },
    async (span) => {
      const outcome = await run();
      if (!span.isRecording()) return outcome;
      const { siteId, articleId, revision } = outcome.subject;
      if (siteId !== null) span.setAttribute('content_service.site.id', siteId);
      if (articleId !== null) span.setAttribute('content_service.article.id', articleId);
      if (revision !== null) span.setAttribute('content_service.article.revision', revision);
      if (!outcome.ok) noteError(span, outcome.error);
      return outcome;
    },
  );
}
