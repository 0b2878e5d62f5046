import { DomainError } from '../errors.ts';

/*
 * The password policy: a length from PASSWORD_MIN_LENGTH to PASSWORD_MAX_LENGTH characters. The
 * command handlers check it wherever a password is set (an account or a staff member created with one,
 * either changing theirs); the web form and the CLI check it first to answer in their own words.
 */

/** The shortest password the service accepts. */
export const PASSWORD_MIN_LENGTH = 12;
/** The longest: argon2 hashes anything, but a megabyte of password is no password. */
export const PASSWORD_MAX_LENGTH = 1024;

/**
 * What is wrong with a password, as the end of a sentence "The password must be …" (`at least 12
 * characters long`), or null when it may be set.
 */
export function passwordProblem(password: string): string | null {
  if (password.length < PASSWORD_MIN_LENGTH) return `at least ${PASSWORD_MIN_LENGTH} characters long`;
  if (password.length > PASSWORD_MAX_LENGTH) return `at most ${PASSWORD_MAX_LENGTH} characters long`;
  return null;
}

/** Refuses a password the policy does not accept: `invalid_request`. */
export function checkPassword(password: string): void {
  const problem = passwordProblem(password);
  if (problem !== null) throw new DomainError('invalid_request', `The password must be ${problem}`);
}

/** The argon2 parameters every password hash is made with (the `@node-rs/argon2` defaults), at least. */
export const PASSWORD_HASH_MIN = { memoryKiB: 19456, passes: 2, lanes: 1 } as const;

const PHC_ARGON2ID =
  /^\$argon2id\$v=19\$m=(\d{1,8}),t=(\d{1,4}),p=(\d{1,3})\$([A-Za-z0-9+/]{22,})\$([A-Za-z0-9+/]{43,})$/;

/**
 * Whether a stored secret is a password hash the service could have made: argon2id, version 19, in
 * PHC notation, with at least the service's memory, passes and lanes, a salt of at least 16 bytes and
 * a hash of at least 32.
 */
export function isPasswordHash(secret: string): boolean {
  const m = PHC_ARGON2ID.exec(secret);
  if (!m) return false;
  return (
    Number(m[1]) >= PASSWORD_HASH_MIN.memoryKiB &&
    Number(m[2]) >= PASSWORD_HASH_MIN.passes &&
    Number(m[3]) >= PASSWORD_HASH_MIN.lanes
  );
}
