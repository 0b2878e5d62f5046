import { bringAsyncUpToDate } from '../catch-up.ts';
import { type CliDeps, count, parse } from '../command.ts';

/** `seed-demo`: a new demo account (apps/cli/seed-demo.ts), its sign-in and key said once. */
export async function run(args: string[], deps: CliDeps): Promise<number> {
  const { out } = deps;
  const { values } = parse(args, {
    sites: { type: 'string' },
    articles: { type: 'string' },
    backlinks: { type: 'string' },
    seed: { type: 'string' },
    json: { type: 'boolean' },
  });
  const opts = {
    sites: count('sites', 2, values.sites),
    articles: count('articles', 12, values.articles),
    backlinks: count('backlinks', 40, values.backlinks),
    ...(values.seed !== undefined ? { seed: count('seed', 0, values.seed) } : {}),
  };
  const { seedDemo } = await import('../seed-demo.ts');
  const rt = await deps.open();
  const result = await seedDemo(rt, opts);
  await bringAsyncUpToDate(rt, deps);
  if (values.json) out(JSON.stringify(result));
  else {
    out(`account  ${result.account_id}`);
    out(`sign in  ${result.email} / ${result.password}`);
    out(`api key  ${result.api_key}   (write scope; shown once)`);
    for (const s of result.sites) out(`site     ${s.id}  ${s.domain}`);
  }
  return 0;
}
