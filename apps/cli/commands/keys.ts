import { unwrap } from '../../application/call.ts';
import { type CliDeps, parse, required, UsageError } from '../command.ts';
import { operatorCall, recordOperatorChange } from '../operator.ts';

/** `keys create|list|revoke`: an account's API keys, through the `keys` use cases. */
export async function run([sub, ...args]: string[], { open, out, err }: CliDeps): Promise<number> {
  if (sub === 'create') {
    const { values } = parse(args, {
      account: { type: 'string' },
      name: { type: 'string' },
      scope: { type: 'string' },
    });
    const { KeyScope } = await import('../../../domain/account/events.ts');
    const scope = KeyScope.safeParse(values.scope ?? 'read');
    if (!scope.success) throw new UsageError('--scope must be read or write');
    const accountId = required(values, 'account');
    const { createKeys } = await import('../../application/keys.ts');
    const rt = await open();
    const key = unwrap(
      await createKeys(rt).create(operatorCall(accountId), {
        name: values.name ?? 'API key',
        scope: scope.data,
      }),
    );
    await recordOperatorChange(rt, accountId, 'create_api_key');
    out(JSON.stringify({ key_id: key.keyId, api_key: key.key, prefix: key.prefix, scope: key.scope }));
    err('The key is shown this once: store it now. Only its hash is kept.');
    return 0;
  }
  if (sub === 'list') {
    const { values } = parse(args, { account: { type: 'string' } });
    // Every argument is read before the database is opened: a usage error opens nothing.
    const accountId = required(values, 'account');
    const { createKeys } = await import('../../application/keys.ts');
    const keys = unwrap(await createKeys(await open()).list(operatorCall(accountId)));
    for (const k of keys) {
      out(
        JSON.stringify({
          key_id: k.id,
          name: k.name,
          prefix: k.prefix,
          scope: k.scope,
          created_at: k.created_at.toISOString(),
          revoked_at: k.revoked_at?.toISOString() ?? null,
          last_used_at: k.last_used_at?.toISOString() ?? null,
        }),
      );
    }
    return 0;
  }
  if (sub === 'revoke') {
    const { values } = parse(args, { account: { type: 'string' }, key: { type: 'string' } });
    const accountId = required(values, 'account');
    const keyId = required(values, 'key');
    const { createKeys } = await import('../../application/keys.ts');
    const rt = await open();
    const r = unwrap(await createKeys(rt).revoke(operatorCall(accountId), keyId));
    if (r.revoked) await recordOperatorChange(rt, accountId, 'revoke_api_key');
    err(r.revoked ? 'key revoked' : 'key was already revoked');
    return 0;
  }
  throw new UsageError('keys: expected create, list or revoke');
}
