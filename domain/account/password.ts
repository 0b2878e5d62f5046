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
