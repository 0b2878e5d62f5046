import { DomainError } from '../../domain/errors.ts';
import type { AnswerKey } from '../../infra/idempotency.ts';
import { findArticleSite } from '../../projections/articles.ts';
import { type Call, type Idempotency, type Note, requireWrite } from './call.ts';
import type { EditResult } from './commands/index.ts';
import type { ApplicationDeps } from './deps.ts';
import { once } from './idempotency.ts';
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
   * Runs one change of an article the call owns (`own` first): with an idempotency key, once
   * (apps/application/idempotency.ts: `change` is given the key its answer is kept under); otherwise
   * the edit is counted against the daily limit (the decision noted, refused past it) just before the
   * change runs; the revision it made is noted.
   */
  write(
    call: Call,
    note: Note,
    idempotency: Idempotency | undefined,
    change: (answerKey: AnswerKey | undefined) => Promise<EditResult>,
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
      const work = async (answerKey: AnswerKey | undefined): Promise<ArticleChangeOut> => {
        const decision = await editLimit.take(accountId);
        note.edits(decision);
        if (!decision.allowed) {
          throw new DomainError(
            'edit_limit_reached',
            `The account has made its ${decision.policy.quota} article edits for today (UTC); more are possible after midnight UTC`,
          );
        }
        const result = await change(answerKey);
        // A change that changed nothing made no revision: its record names none.
        if (result.changed) note.revision(result.revision);
        return changeOut(result);
      };
      if (!idempotency) return { change: await work(undefined), replayed: false };
      const { value, replayed } = await once(db, accountId, idempotency, work);
      return { change: value, replayed };
    },
  };
}
