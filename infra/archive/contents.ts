import { z } from 'zod';
import { isPasswordHash } from '../../domain/account/password.ts';
import { admitArticleEvent, type StoredArticle } from '../../domain/article/decider.ts';
import type { ArticleEvent } from '../../domain/article/events.ts';
import { isDomainError } from '../../domain/errors.ts';
import { type DomainEvent, streamOfEvent, validateEvent } from '../../domain/events.ts';
import { requireText } from '../../domain/input.ts';
import { createHtmlMemory } from '../html-memory.ts';
import { isApiKeyHash } from '../ids.ts';
import { ArchiveRefused } from './format.ts';
import type { Line } from './lines.ts';

/*
 * What an archive's rows say, checked as the writes that made them were: an import loads only what the
 * service itself could have written (docs/operations.md, "Export and import").
 *
 * - Every event passes the event store's own check on append (`validateEvent`, the zod schema of its
 *   type: an unknown type or a malformed payload is refused), sits on the stream its data names at the
 *   next version of that stream, in position order, and is one its aggregate's rules allow after the
 *   stream's earlier events: an account's and a staff member's stream opens with their creation; a key
 *   is revoked once, after it was created; an article event is one `decide` could have made
 *   (`admitArticleEvent`: the body as the sanitiser stores it, titles, protected blocks, revisions).
 * - A credential belongs to a holder whose events say it was set (a password by `PasswordSet` or
 *   `PasswordChanged`, an API key by `ApiKeyCreated`) and is a hash the service makes (argon2id with at
 *   least its parameters; SHA-256); no two credentials share a secret (salted hashes never repeat: a
 *   copied one is someone else's password).
 * - The `streams` rows are the log's streams at their last versions.
 *
 * Each refusal names the part and the line. What it keeps between lines grows with the installation's
 * streams (a version each; an article's protected blocks; an account's keys), never with its bodies.
 */

const EventRow = z.strictObject({
  position: z.number().int().positive(),
  event_id: z.string().min(1),
  stream_id: z.string().min(1),
  version: z.number().int().positive(),
  type: z.string().min(1),
  data: z.unknown(),
  metadata: z.unknown(),
  recorded_at: z.string().min(1),
});

const CredentialRow = z.strictObject({
  holder_id: z.string().min(1),
  kind: z.enum(['password', 'api_key']),
  secret: z.string(),
  updated_at: z.string().min(1),
});

const StreamRow = z.strictObject({
  stream_id: z.string().min(1),
  version: z.number().int().positive(),
  stream_type: z.string(),
  updated_at: z.string().min(1),
});

/** A support staff member the archive brings, as the import reports them. */
export type ArchiveStaffMember = { id: string; email: string; name: string; password: boolean };

export type ContentCheck = {
  /** One line of an events part. */
  event(line: Line, where: string): void;
  /** One line of a table part (`table`: its table). */
  row(table: string, line: Line, where: string): void;
  /** One line of the checkpoints part. */
  checkpoint(line: Line, where: string): void;
  /** After the last line: what can only be checked with every part read. */
  finish(): { staff: ArchiveStaffMember[] };
};

const at = (where: string, line: Line): string => `${where} line ${line.n}`;

function parsed(line: Line, where: string): unknown {
  try {
    return JSON.parse(line.text);
  } catch {
    throw new ArchiveRefused(`${at(where, line)} is not JSON: the archive is damaged`);
  }
}

function shaped<T>(schema: z.ZodType<T>, line: Line, where: string, what: string): T {
  const result = schema.safeParse(parsed(line, where));
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  throw new ArchiveRefused(
    `${at(where, line)} is not ${what}: ${issue?.path.join('.') || 'the row'}: ${issue?.message ?? 'invalid'}`,
  );
}

const why = (error: unknown): string =>
  isDomainError(error) ? error.message : error instanceof Error ? error.message : String(error);

const ARTICLE_TYPES: ReadonlySet<string> = new Set([
  'ArticleCreated',
  'ArticleEdited',
  'FeaturedImageReplaced',
  'ArticleRestored',
  'ArticleStatusChanged',
]);

/** The checks of one archive's rows, fed its lines in archive order. */
export function createContentCheck(): ContentCheck {
  const memory = createHtmlMemory();
  const versions = new Map<string, number>();
  const articles = new Map<string, StoredArticle>();
  /** Key id -> account id, and whether it was revoked. */
  const keys = new Map<string, { accountId: string; revoked: boolean }>();
  /** Holders (account or staff ids) whose events say a password was set. */
  const passwordHolders = new Set<string>();
  const staff = new Map<string, ArchiveStaffMember>();
  const credentials: Array<{ holderId: string; kind: 'password' | 'api_key'; where: string }> = [];
  const secrets = new Map<string, string>();
  const streamRows = new Map<string, { version: number; where: string }>();
  let lastPosition = 0;

  /** The rules of the aggregate the event belongs to, on top of its schema. */
  const admit = (event: DomainEvent, version: number): void => {
    if (ARTICLE_TYPES.has(event.type)) {
      const e = event as ArticleEvent;
      articles.set(e.data.articleId, admitArticleEvent(articles.get(e.data.articleId), e, memory));
      return;
    }
    switch (event.type) {
      case 'AccountOpened':
      case 'StaffMemberAdded':
        if (version !== 1) throw new Error(`${event.type} is not the first event of its stream`);
        requireText('name', event.data.name, { lines: false });
        if (event.type === 'StaffMemberAdded') {
          const { staffId, email, name } = event.data;
          staff.set(staffId, { id: staffId, email, name, password: false });
        }
        return;
      case 'ApiKeyCreated':
        requireText('name', event.data.name, { lines: false });
        if (keys.has(event.data.keyId)) throw new Error(`key ${event.data.keyId} was created already`);
        keys.set(event.data.keyId, { accountId: event.data.accountId, revoked: false });
        return;
      case 'ApiKeyRevoked': {
        const key = keys.get(event.data.keyId);
        if (key?.accountId !== event.data.accountId)
          throw new Error(`key ${event.data.keyId} was never created on account ${event.data.accountId}`);
        if (key.revoked) throw new Error(`key ${event.data.keyId} was revoked already`);
        key.revoked = true;
        return;
      }
      case 'PasswordSet':
      case 'PasswordChanged': {
        passwordHolders.add(event.data.holderId);
        const member = event.data.holder === 'staff' ? staff.get(event.data.holderId) : undefined;
        if (member) member.password = true;
        return;
      }
      default:
        return;
    }
  };

  return {
    event(line, where) {
      const row = shaped(EventRow, line, where, 'an event of the log');
      if (row.position <= lastPosition)
        throw new ArchiveRefused(
          `${at(where, line)}: position ${row.position} follows ${lastPosition}: the log is not in position order`,
        );
      lastPosition = row.position;
      const event = { type: row.type, data: row.data, metadata: row.metadata };
      try {
        // The event store's own check on append.
        validateEvent(event);
      } catch (error) {
        throw new ArchiveRefused(`${at(where, line)}: ${why(error)}: no write makes this event`);
      }
      const domainEvent = event as DomainEvent;
      const stream = streamOfEvent(domainEvent);
      if (row.stream_id !== stream)
        throw new ArchiveRefused(
          `${at(where, line)}: a ${row.type} is on stream ${row.stream_id}, but its data puts it on ${stream}: no write makes this event`,
        );
      const expected = (versions.get(stream) ?? 0) + 1;
      if (row.version !== expected)
        throw new ArchiveRefused(
          `${at(where, line)}: ${row.type} is version ${row.version} of ${stream}, whose next version is ${expected}`,
        );
      const opening = stream.startsWith('account-')
        ? 'AccountOpened'
        : stream.startsWith('staff-')
          ? 'StaffMemberAdded'
          : undefined;
      if (row.version === 1 && opening !== undefined && row.type !== opening)
        throw new ArchiveRefused(
          `${at(where, line)}: ${stream} starts with ${row.type}, not ${opening}: no write makes this event`,
        );
      try {
        admit(domainEvent, row.version);
      } catch (error) {
        throw new ArchiveRefused(`${at(where, line)}: ${row.type}: ${why(error)}: no write makes this event`);
      }
      versions.set(stream, row.version);
    },

    row(table, line, where) {
      if (table === 'credentials') {
        const row = shaped(CredentialRow, line, where, 'a credential');
        const form =
          row.kind === 'password'
            ? isPasswordHash(row.secret)
              ? null
              : 'an argon2id password hash as the service makes it'
            : isApiKeyHash(row.secret)
              ? null
              : "an API key's SHA-256 as the service makes it";
        if (form !== null)
          throw new ArchiveRefused(`${at(where, line)}: the ${row.kind} of ${row.holder_id} is not ${form}`);
        const same = secrets.get(row.secret);
        if (same !== undefined)
          throw new ArchiveRefused(
            `${at(where, line)}: the ${row.kind} of ${row.holder_id} is the same hash as ${same}'s: ` +
              'no two credentials share one (hashes are salted or of random keys)',
          );
        secrets.set(row.secret, row.holder_id);
        credentials.push({ holderId: row.holder_id, kind: row.kind, where: at(where, line) });
        return;
      }
      if (table === 'streams') {
        const row = shaped(StreamRow, line, where, 'a stream');
        if (row.stream_type !== row.stream_id.split('-')[0])
          throw new ArchiveRefused(
            `${at(where, line)}: stream ${row.stream_id} is not of type ${row.stream_type}`,
          );
        if (streamRows.has(row.stream_id))
          throw new ArchiveRefused(`${at(where, line)}: stream ${row.stream_id} is listed twice`);
        streamRows.set(row.stream_id, { version: row.version, where: at(where, line) });
        return;
      }
      parsed(line, where);
    },

    checkpoint(line, where) {
      parsed(line, where);
    },

    finish() {
      for (const c of credentials) {
        if (c.kind === 'password' && !passwordHolders.has(c.holderId))
          throw new ArchiveRefused(
            `${c.where}: a password for ${c.holderId}, but no event of the log sets one for them: no write makes this credential`,
          );
        if (c.kind === 'api_key' && !keys.has(c.holderId))
          throw new ArchiveRefused(
            `${c.where}: an API key hash for ${c.holderId}, but no ApiKeyCreated of the log creates that key: no write makes this credential`,
          );
      }
      for (const [stream, row] of streamRows) {
        const version = versions.get(stream);
        if (version !== row.version)
          throw new ArchiveRefused(
            `${row.where}: stream ${stream} at version ${row.version}, but the log ${version === undefined ? 'has no such stream' : `has it at version ${version}`}`,
          );
      }
      if (streamRows.size !== versions.size) {
        const missing = [...versions.keys()].find((s) => !streamRows.has(s));
        throw new ArchiveRefused(`the log has stream ${missing}, which the archive's streams table lacks`);
      }
      return { staff: [...staff.values()] };
    },
  };
}
