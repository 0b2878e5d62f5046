import { z } from 'zod';
import { type Event, eventSchema } from '../event.ts';
import { NAME_MAX } from '../input.ts';

export const KeyScope = z.enum(['read', 'write']);
export type KeyScope = z.infer<typeof KeyScope>;

/*
 * No secret is ever in an event: password hashes and API key hashes live in the `credentials` table
 * (apps/application/commands/credentials.ts writes it in the append's transaction). The events say
 * only that a credential was set. The schemas are strict: an event carrying a `passwordHash` or
 * `hash` is refused on append.
 */
export const AccountOpenedData = z.strictObject({
  accountId: z.string().min(1),
  name: z.string().min(1).max(NAME_MAX),
  email: z.email(),
});
export const ApiKeyCreatedData = z.strictObject({
  accountId: z.string().min(1),
  keyId: z.string().min(1),
  name: z.string().min(1).max(NAME_MAX),
  /** The visible start of the key, e.g. `cs_live_AbC123`, to recognise it in lists. */
  prefix: z.string().min(1),
  scope: KeyScope,
});
const ApiKeyRevokedData = z.strictObject({ accountId: z.string().min(1), keyId: z.string().min(1) });
const StaffMemberAddedData = z.strictObject({
  staffId: z.string().min(1),
  email: z.email(),
  name: z.string().min(1).max(NAME_MAX),
});
/** Whose password: an account holder's (on the account's stream) or a support staff member's (on theirs). */
const PasswordHolder = z.enum(['account', 'staff']);
/** A first password was set (with the account or staff member, or later for one without). */
const PasswordSetData = z.strictObject({ holder: PasswordHolder, holderId: z.string().min(1) });
/** The password was replaced: by its holder (web page) or by an operator (CLI). */
export const PasswordChangedData = z.strictObject({
  holder: PasswordHolder,
  holderId: z.string().min(1),
  by: z.enum(['holder', 'operator']),
});

export const AccountEventSchemas = {
  AccountOpened: eventSchema('AccountOpened', AccountOpenedData),
  ApiKeyCreated: eventSchema('ApiKeyCreated', ApiKeyCreatedData),
  ApiKeyRevoked: eventSchema('ApiKeyRevoked', ApiKeyRevokedData),
  StaffMemberAdded: eventSchema('StaffMemberAdded', StaffMemberAddedData),
  PasswordSet: eventSchema('PasswordSet', PasswordSetData),
  PasswordChanged: eventSchema('PasswordChanged', PasswordChangedData),
} as const;

export type AccountOpened = Event<'AccountOpened', z.infer<typeof AccountOpenedData>>;
export type ApiKeyCreated = Event<'ApiKeyCreated', z.infer<typeof ApiKeyCreatedData>>;
export type ApiKeyRevoked = Event<'ApiKeyRevoked', z.infer<typeof ApiKeyRevokedData>>;
/** Support staff live on their own stream (`staff-<id>`): they belong to no account. */
export type StaffMemberAdded = Event<'StaffMemberAdded', z.infer<typeof StaffMemberAddedData>>;

export type PasswordSet = Event<'PasswordSet', z.infer<typeof PasswordSetData>>;
export type PasswordChanged = Event<'PasswordChanged', z.infer<typeof PasswordChangedData>>;

export type AccountEvent =
  | AccountOpened
  | ApiKeyCreated
  | ApiKeyRevoked
  | StaffMemberAdded
  | PasswordSet
  | PasswordChanged;

export const accountStream = (accountId: string): string => `account-${accountId}`;
export const staffStream = (staffId: string): string => `staff-${staffId}`;
