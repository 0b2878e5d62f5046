import { DomainError } from '../../domain/errors.ts';
import { idempotent, requestHash } from '../../infra/idempotency.ts';
import { findArticleSite } from '../../projections/articles.ts';
import { type Call, type Idempotency, type Note, requireWrite } from './call.ts';
import type { EditResult, KeepAnswer } from './commands/index.ts';
import type { ApplicationDeps } from './deps.ts';
import { type ArticleChangeOut, changeOut } from './wire.ts';

/** A write's answer: the change, and whether it is the first answer replayed (an idempotent retry). */
export type ArticleWrite = { change: ArticleChangeOut; replayed: boolean };

export type ArticleWriter = {
  /**
   * The site of an article of the call's account, noted; `not_found` for an unknown article and for
   * another account's alike. Confirms the call's API key unrevoked in the same statement.
   */
  own(call: Call, note: Note, articleId: string): Promise<string>;
  /**
   * Runs one change of an article the call owns (`own` first): with an idempotency key a retry
   * replays the first answer without running again; otherwise the edit is counted against the daily
   * limit (the decision noted, refused past it) just before the change runs; the revision it made is
   * noted. `change`
   * passes `keep` on to the command (its caller's `keep`): the answer is kept by the change's own
   * transaction.
   */
  write(
    call: Call,
    note: Note,
    idempotency: Idempotency | undefined,
    change: (keep: KeepAnswer | undefined) => Promise<EditResult>,
  ): Promise<ArticleWrite>;
};

export function createArticleWriter(deps: Pick<ApplicationDeps, 'db' | 'editLimit'>): ArticleWriter {
  const { db, editLimit } = deps;
  return {
    async own(call, note, articleId) {
      const { principal } = call;
      note.article(articleId);
      const siteId = await findArticleSite(db, principal.accountId, articleId, principal.liveKey);
      if (!siteId) throw new DomainError('not_found', `No article ${articleId}`);
      note.site(siteId);
      return siteId;
    },

    async write(call, note, idempotency, change) {
      const { accountId } = call.principal;
      requireWrite(call.principal, 'This call');
      const work = async (keep: KeepAnswer | undefined): Promise<ArticleChangeOut> => {
        const decision = await editLimit.take(accountId);
        note.edits(decision);
        if (!decision.allowed) {
          throw new DomainError(
            'edit_limit_reached',
            `The account has made its ${decision.policy.quota} article edits for today (UTC); more are possible after midnight UTC`,
          );
        }
        const result = await change(keep);
        // A change that changed nothing made no revision: its record names none.
        if (result.changed) note.revision(result.revision);
        return changeOut(result);
      };
      if (!idempotency) return { change: await work(undefined), replayed: false };
      const { response, replayed } = await idempotent(
        db,
        accountId,
        idempotency.key,
        requestHash(idempotency.request),
        async (keepResponse) => ({
          status: 200,
          headers: {},
          body: await work((result) => keepResponse({ status: 200, headers: {}, body: changeOut(result) })),
        }),
      );
      return { change: response.body as ArticleChangeOut, replayed };
    },
  };
}
