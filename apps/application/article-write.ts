import { DomainError, isDomainError } from '../../domain/errors.ts';
import type { AnswerKey } from '../../infra/idempotency.ts';
import { invalidKeyError, isKeyLive } from '../../projections/accounts.ts';
import { findArticleSite } from '../../projections/articles.ts';
import { type ArticleChangeOut, changeOut } from './articles.ts';
import { type Call, type Idempotency, type Note, requireWrite } from './call.ts';
import type { EditResult } from './commands/index.ts';
import { type ApplicationDeps, readsOf } from './deps.ts';
import { onceIfKeyed } from './idempotency.ts';

/** A write's answer: the change, and whether it is the first answer replayed (an idempotent retry). */
export type ArticleWrite = { change: ArticleChangeOut; replayed: boolean };

/**
 * An article the call owns: its site, and the call's API key when no statement has yet found it
 * unrevoked (the change's append checks it: `confirmKey` of the article commands).
 */
export type Owned = { siteId: string; confirmKey: string | undefined };

export type ArticleWriter = {
  /**
   * The site of an article of the call's account, noted; `not_found` for an unknown article and for
   * another account's alike. Confirms the call's API key unrevoked in the same statement. With
   * `keyInChange` (a change that will append, given `confirmKey`), an article this runtime remembers
   * as the account's needs no statement: the key, if unconfirmed, is left to the append, and the site
   * is noted once it is confirmed (`write`).
   */
  own(call: Call, note: Note, articleId: string, opts?: { keyInChange?: boolean }): Promise<Owned>;
  /**
   * Runs one change of an article the call owns (`own` first): with an idempotency key, once
   * (apps/application/idempotency.ts: `change` is given the key its answer is kept under); otherwise
   * the edit is counted against the daily limit (the decision noted, refused past it) just before the
   * change runs; the revision it made is noted. With `owned` from `own` and a key left to the change: a
   * revoked key is refused before anything else is said of the call (its site, its edit-limit decision),
   * as `own`'s statement would have refused it.
   */
  write(
    call: Call,
    note: Note,
    idempotency: Idempotency | undefined,
    change: (answerKey: AnswerKey | undefined) => Promise<EditResult>,
    owned?: Owned,
  ): Promise<ArticleWrite>;
};

export function createArticleWriter(
  deps: Pick<ApplicationDeps, 'db' | 'reads' | 'editLimit' | 'commands'>,
): ArticleWriter {
  const { db, editLimit, commands } = deps;
  const reads = readsOf(deps);
  return {
    async own(call, note, articleId, opts = {}) {
      const { principal } = call;
      note.article(articleId);
      if (opts.keyInChange === true && principal.scope === 'write') {
        const known = commands.knownArticle(articleId);
        if (known?.accountId === principal.accountId) {
          if (principal.liveKey === undefined) note.site(known.siteId);
          return { siteId: known.siteId, confirmKey: principal.liveKey };
        }
      }
      const siteId = await findArticleSite(db, principal.accountId, articleId, principal.liveKey);
      if (!siteId) throw new DomainError('not_found', `No article ${articleId}`);
      note.site(siteId);
      return { siteId, confirmKey: undefined };
    },

    async write(call, note, idempotency, change, owned) {
      const { accountId } = call.principal;
      requireWrite(call.principal, 'This call');
      const pendingKey = owned?.confirmKey;
      const work = async (answerKey: AnswerKey | undefined): Promise<ArticleChangeOut> => {
        const decision = await editLimit.take(accountId);
        /** What the call says once its key is known good (or the refusal is not the key's). */
        const settle = (): void => {
          if (owned !== undefined && pendingKey !== undefined) note.site(owned.siteId);
          note.edits(decision);
        };
        if (!decision.allowed) {
          if (pendingKey !== undefined && !(await isKeyLive(db, pendingKey))) throw invalidKeyError();
          settle();
          throw new DomainError(
            'edit_limit_reached',
            `The account has made its ${decision.policy.quota} article edits for today (UTC); more are possible after midnight UTC`,
          );
        }
        let result: EditResult;
        try {
          result = await change(answerKey);
        } catch (error) {
          if (pendingKey === undefined || !isDomainError(error) || error.code !== 'unauthenticated') settle();
          throw error;
        }
        settle();
        // A change that changed nothing made no revision: its record names none.
        if (result.changed) {
          note.revision(result.revision);
          // Committed: the account's next reads, on any replica, see it.
          await reads.wrote(accountId);
        }
        return changeOut(result);
      };
      const { value, replayed } = await onceIfKeyed(db, accountId, idempotency, work);
      return { change: value, replayed };
    },
  };
}
