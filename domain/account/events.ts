import { z } from 'zod';
import { type Event, eventSchema } from '../event.ts';

export const KeyScope = z.enum(['read', 'write']);
export type KeyScope = z.infer<typeof KeyScope>;

export const AccountOpenedData = z.object({
  accountId: z.string().min(1),
  name: z.string().min(1).max(200),
  email: z.email(),
  /** argon2id hash of the account holder's password; null when sign-in is not set up. */
  passwordHash: z.string().nullable(),
});
export const ApiKeyCreatedData = z.object({
  accountId: z.string().min(1),
  keyId: z.string().min(1),
  name: z.string().min(1).max(200),
  /** The visible start of the key, e.g. `cs_live_AbC123`, to recognise it in lists. */
  prefix: z.string().min(1),
  /** SHA-256 (hex) of the whole key; the key itself is never stored. */
  hash: z.string().regex(/^[0-9a-f]{64}$/),
  scope: KeyScope,
});
export const ApiKeyRevokedData = z.object({ accountId: z.string().min(1), keyId: z.string().min(1) });
export const StaffMemberAddedData = z.object({
  staffId: z.string().min(1),
  email: z.email(),
  name: z.string().min(1).max(200),
  passwordHash: z.string().nullable(),
});

export const AccountEventSchemas = {
  AccountOpened: eventSchema('AccountOpened', AccountOpenedData),
  ApiKeyCreated: eventSchema('ApiKeyCreated', ApiKeyCreatedData),
  ApiKeyRevoked: eventSchema('ApiKeyRevoked', ApiKeyRevokedData),
  StaffMemberAdded: eventSchema('StaffMemberAdded', StaffMemberAddedData),
} as const;

export type AccountOpened = Event<'AccountOpened', z.infer<typeof AccountOpenedData>>;
export type ApiKeyCreated = Event<'ApiKeyCreated', z.infer<typeof ApiKeyCreatedData>>;
export type ApiKeyRevoked = Event<'ApiKeyRevoked', z.infer<typeof ApiKeyRevokedData>>;
/** Support staff live on their own stream (`staff-<id>`): they belong to no account. */
export type StaffMemberAdded = Event<'StaffMemberAdded', z.infer<typeof StaffMemberAddedData>>;

export type AccountEvent = AccountOpened | ApiKeyCreated | ApiKeyRevoked | StaffMemberAdded;

export const accountStream = (accountId: string): string => `account-${accountId}`;
export const staffStream = (staffId: string): string => `staff-${staffId}`;
