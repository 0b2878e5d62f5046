import { newPassword } from '../../../infra/ids.ts';
import type { createAccounts } from '../../application/accounts.ts';
import type { createCredentials } from '../../application/credentials.ts';
import { type CliRuntime, type CommandModule, parse, required, UsageError } from '../command.ts';

/*
 * `accounts` and `staff` take the same two forms, `create` and `set-password`, over the `accounts` and
 * `credentials` use cases; what differs (which use case, what is recorded, the id's name in the result) each command
 * gives.
 */

type Accounts = ReturnType<typeof createAccounts>;
type Credentials = ReturnType<typeof createCredentials>;

type People = {
  /** The command's name, in its usage errors. */
  name: string;
  /** Makes the person; the id to print (`{account_id}` or `{staff_id}`). */
  create(
    accounts: Accounts,
    rt: CliRuntime,
    person: { name: string; email: string; password: string },
  ): Promise<Record<string, string>>;
  /** Gives the person with this email the password; who it was (id and email), or a `not_found` DomainError. */
  setPassword(
    credentials: Credentials,
    rt: CliRuntime,
    email: string,
    password: string,
  ): Promise<Record<string, string>>;
};

/** Refuses a password the policy does not accept as a usage error, before anything is opened. */
async function checkNewPassword(password: string): Promise<void> {
  const { passwordProblem } = await import('../../../domain/account/password.ts');
  const problem = passwordProblem(password);
  if (problem !== null) throw new UsageError(`the password must be ${problem}`);
}

/** The first line of stdin (a password piped in: `printf '%s' "$P" | npm run cli -- ... --password-stdin`). */
async function readPassword(stdin: AsyncIterable<string | Buffer> = process.stdin): Promise<string> {
  let text = '';
  for await (const chunk of stdin) {
    text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    if (text.length > 8192) break;
  }
  return text.split(/\r?\n/)[0] ?? '';
}

/** The command `people.name` with its forms `create` and `set-password`. */
export function peopleCommand(people: People): CommandModule['run'] {
  return async ([sub, ...args], { open, out, stdin }) => {
    if (sub === 'set-password') {
      const { values } = parse(args, {
        email: { type: 'string' },
        'password-stdin': { type: 'boolean' },
      });
      const email = required(values, 'email');
      const password = values['password-stdin'] ? await readPassword(stdin) : newPassword();
      await checkNewPassword(password);
      const { createCredentials } = await import('../../application/credentials.ts');
      const rt = await open();
      const who = await people.setPassword(createCredentials(rt), rt, email, password);
      out(JSON.stringify({ ...who, ...(values['password-stdin'] ? {} : { password }) }));
      return 0;
    }
    if (sub !== 'create') throw new UsageError(`${people.name}: expected "create" or "set-password"`);
    const { values } = parse(args, {
      name: { type: 'string' },
      email: { type: 'string' },
      password: { type: 'string' },
    });
    const { z } = await import('zod');
    const email = z.email().safeParse(required(values, 'email'));
    if (!email.success) throw new UsageError('--email must be an email address');
    const password = values.password ?? newPassword();
    await checkNewPassword(password);
    const person = { name: required(values, 'name'), email: email.data, password };
    const { createAccounts } = await import('../../application/accounts.ts');
    const rt = await open();
    const created = await people.create(createAccounts(rt), rt, person);
    out(JSON.stringify({ ...created, email: email.data, ...(values.password ? {} : { password }) }));
    return 0;
  };
}
