import { readFileSync } from 'node:fs';
import path from 'node:path';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { SEARCH_LANGUAGE_DEFAULT } from '../domain/article/search.ts';
import {
  EDIT_LIMIT_PER_DAY,
  REQUESTS_PER_MINUTE,
  WEBHOOK_RETRY_SCHEDULE_SECONDS,
} from '../domain/vocabulary.ts';
import { ConfigError } from './config-error.ts';

/** Activity records a process holds while the database cannot take them, by default (ACTIVITY_SPOOL_MAX). */
export const ACTIVITY_SPOOL_MAX = 20_000;

const LogLevel = z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

function isPemCertificateFile(file: string): boolean {
  try {
    return readFileSync(file, 'utf8').includes('-----BEGIN CERTIFICATE-----');
  } catch {
    return false;
  }
}

function isPostgresUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'postgres:' || url.protocol === 'postgresql:') && url.hostname !== '';
  } catch {
    return false;
  }
}

const boolish = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'expected true or false' })
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

/** PAGE_RATE_LIMIT_PER_MINUTE's default: a person opening pages never comes near it. */
export const PAGE_VIEWS_PER_MINUTE = 600;

/** HEAVY_WAITING_PER_ACCOUNT's default: one account's large requests waiting for their turn in a process. */
export const HEAVY_WAITING_PER_ACCOUNT = 4;
/** REQUEST_BODY_TIMEOUT_SECONDS's default: how long a request may take to arrive, headers and body. */
export const REQUEST_ARRIVAL_SECONDS = 30;

/**
 * The text search configurations PostgreSQL has built in (`pg_ts_config`), those of every version the
 * service runs on (PostgreSQL 15 and later, PGlite): what SEARCH_LANGUAGE may name.
 */
export const SEARCH_LANGUAGES = [
  ...['simple', 'arabic', 'armenian', 'basque', 'catalan', 'danish', 'dutch', 'english', 'finnish'],
  ...['french', 'german', 'greek', 'hindi', 'hungarian', 'indonesian', 'irish', 'italian', 'lithuanian'],
  ...['nepali', 'norwegian', 'portuguese', 'romanian', 'russian', 'serbian', 'spanish', 'swedish'],
  ...['tamil', 'turkish', 'yiddish'],
] as const;

/** The environment of CONTRACT "Configuration", validated once at start. */
export const ConfigSchema = z.object({
  DATABASE_URL: z
    .url({ protocol: /^postgres(ql)?$/, message: 'expected a postgres:// or postgresql:// URL' })
    .optional(),
  /**
   * PostgreSQL streaming replicas of DATABASE_URL for the use cases' reads (comma-separated postgres://
   * URLs), with read-your-writes per account (docs/operations.md, "Read replicas"). Unset: every read
   * on DATABASE_URL.
   */
  DATABASE_REPLICA_URLS: z
    .string()
    .transform((v, ctx) => {
      const urls = v
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== '');
      const bad = urls.find((url) => !isPostgresUrl(url));
      if (urls.length === 0 || bad !== undefined) {
        ctx.addIssue({
          code: 'custom',
          message: 'expected comma-separated postgres:// or postgresql:// URLs',
        });
        return z.NEVER;
      }
      return urls;
    })
    .optional(),
  /** Seconds a read replica may lag behind the primary before its reads go elsewhere (CONTRACT: default 5). */
  REPLICA_MAX_LAG_SECONDS: z.coerce
    .number({ message: 'expected a number of seconds' })
    .min(0, 'expected 0 or more')
    .max(86_400, 'expected at most 86400')
    .default(5),
  REDIS_URL: z.url({ protocol: /^rediss?$/, message: 'expected a redis:// or rediss:// URL' }).optional(),
  PORT: z.coerce
    .number({ message: 'expected a port number' })
    .int('expected a whole number')
    .min(0, 'expected 0..65535')
    .max(65535, 'expected 0..65535')
    .default(3000),
  HOST: z.string().min(1, 'must not be empty').default('127.0.0.1'),
  PUBLIC_URL: z.url({ protocol: /^https?$/, message: 'expected an http:// or https:// URL' }).optional(),
  DATA_DIR: z.string().min(1, 'must not be empty').default('./data'),
  /** Where featured images are stored (content-addressed files). Default `<DATA_DIR>/media`. */
  MEDIA_DIR: z.string().min(1, 'must not be empty').optional(),
  /** An extra CA certificate (PEM file) trusted when fetching image URLs, besides the usual roots. */
  MEDIA_FETCH_CA_FILE: z
    .string()
    .refine(isPemCertificateFile, 'expected a readable PEM certificate file')
    .optional(),
  /**
   * Private networks that image URLs, OAuth client metadata documents and webhooks may reach, besides
   * public addresses (comma-separated CIDRs, e.g. `10.20.0.0/16`): for internal hosts. A webhook URL in
   * these networks may be http. Unset: public addresses only.
   */
  OUTBOUND_ALLOW_NETWORKS: z
    .string()
    .transform((v) =>
      v
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== ''),
    )
    .refine(
      (list) => list.every((cidr) => ipaddr.isValidCIDR(cidr)),
      'expected comma-separated CIDR networks like 10.20.0.0/16',
    )
    .optional(),
  /**
   * Which proxies in front of the service to believe about the client's address (`X-Forwarded-For`):
   * a hop count (`1`: the nearest proxy), or comma-separated addresses and CIDRs of the proxies
   * (`10.0.0.0/8, 192.168.1.7`; also `loopback`, `linklocal`, `uniquelocal`). Unset: nobody; the
   * socket's address is the client's. Passed to fastify's `trustProxy`.
   */
  TRUST_PROXY: z
    .string()
    .transform((v, ctx): number | string[] => {
      if (/^\d+$/.test(v.trim())) {
        const hops = Number(v.trim());
        if (hops >= 1 && hops <= 10) return hops;
        ctx.addIssue({ code: 'custom', message: 'expected a hop count from 1 to 10, or proxy addresses' });
        return z.NEVER;
      }
      const list = v
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== '');
      const named = new Set(['loopback', 'linklocal', 'uniquelocal']);
      const bad = list.find((x) => !named.has(x) && !ipaddr.isValid(x) && !ipaddr.isValidCIDR(x));
      if (list.length === 0 || bad !== undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `expected a hop count (1 to 10) or comma-separated proxy addresses or CIDRs${bad ? `; not an address: ${bad}` : ''}`,
        });
        return z.NEVER;
      }
      return list;
    })
    .optional(),
  LOG_LEVEL: LogLevel.default('info'),
  /**
   * Whether `npm start` on a database that has never stored anything makes a demo account and prints
   * how to sign in with it. Unset: on the embedded database only, never on a DATABASE_URL.
   */
  DEMO_ON_FIRST_START: boolish.optional(),
  /** Run the async projectors and job workers inside the server process (the embedded default is complete). */
  RUN_WORKERS: boolish.default(true),
  /**
   * Run the job workers (webhook deliveries, scheduled publishing, monthly reports, housekeeping) and
   * the subscriptions that feed them inside the server process. `npm run worker` runs them whatever
   * this says.
   */
  RUN_JOBS: boolish.default(true),
  /** The prefix of the job queues' keys in Redis (CONTRACT "Jobs"). */
  JOBS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,64}$/, 'expected 1 to 64 letters, digits or . _ -')
    .default('cs'),
  /**
   * How long a worker's lock on a BullMQ job lasts unless renewed, in seconds: a job whose worker died
   * runs again after about this long.
   */
  JOBS_LOCK_SECONDS: z.coerce.number().int('expected a whole number').min(1).max(3_600).default(30),
  /** The delays, in seconds, before each retry of a failed webhook delivery (CONTRACT "Webhooks"). */
  WEBHOOK_RETRY_SCHEDULE: z
    .string()
    .transform((v, ctx) => {
      const parts = v.split(',').map((x) => x.trim());
      const seconds = parts.map(Number);
      if (
        parts.length > 50 ||
        seconds.some((n, i) => parts[i] === '' || !Number.isInteger(n) || n < 0 || n > 604_800)
      ) {
        ctx.addIssue({
          code: 'custom',
          message:
            'expected up to 50 comma-separated whole numbers of seconds (0 to 604800), like 5,300,1800',
        });
        return z.NEVER;
      }
      return seconds;
    })
    .default(() => WEBHOOK_RETRY_SCHEDULE_SECONDS.split(',').map(Number)),
  /** Requests per minute per account (and per client address without a key). CONTRACT: 60. Raised only for benchmarks. */
  RATE_LIMIT_PER_MINUTE: z.coerce
    .number()
    .int('expected a whole number')
    .min(1, 'expected 1 or more')
    .default(REQUESTS_PER_MINUTE),
  /**
   * Milliseconds a request refused by the requests limit waits before its 429 (never past its
   * window's end): a client retrying in a loop slows itself, not the service. 0 answers at once.
   */
  RATE_LIMIT_REFUSAL_PAUSE_MS: z.coerce
    .number()
    .int('expected a whole number')
    .min(0, 'expected 0 or more')
    .max(10_000, 'expected at most 10000')
    .default(1_000),
  /**
   * Web pages (and their form posts) per minute per session, or per client address without one: past
   * it, a 429 page with Retry-After. Far above what a person opens.
   */
  PAGE_RATE_LIMIT_PER_MINUTE: z.coerce
    .number()
    .int('expected a whole number')
    .min(1, 'expected 1 or more')
    .default(PAGE_VIEWS_PER_MINUTE),
  /**
   * Large requests (docs/operations.md "Large requests") of one account (or staff member, or client
   * address without either) that may wait for their turn in a process; beyond, 503 with Retry-After.
   */
  HEAVY_WAITING_PER_ACCOUNT: z.coerce
    .number()
    .int('expected a whole number')
    .min(1, 'expected 1 or more')
    .max(64, 'expected at most 64 (the requests that may wait in all)')
    .default(HEAVY_WAITING_PER_ACCOUNT),
  /** Prefix of the limit counters' Redis keys; give deployments (or test runs) sharing one Redis their own. */
  RATE_LIMIT_KEY_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9:._-]{1,64}$/, 'expected 1 to 64 letters, digits or : . _ -')
    .default('cs:rl'),
  /** Article edits per UTC day per account (CONTRACT "Limits"). */
  EDIT_LIMIT_PER_DAY: z.coerce
    .number()
    .int('expected a whole number')
    .min(1, 'expected 1 or more')
    .default(EDIT_LIMIT_PER_DAY),
  /**
   * The port of the metrics listener (Prometheus text at `/metrics`, docs/operations.md "Metrics"); 0
   * takes a free port (logged). Unset: no metrics. Never the public PORT.
   */
  METRICS_PORT: z.coerce
    .number({ message: 'expected a port number' })
    .int('expected a whole number')
    .min(0, 'expected 0..65535')
    .max(65535, 'expected 0..65535')
    .optional(),
  /** The address the metrics listener binds: loopback unless a scraper elsewhere needs it (`0.0.0.0` in a container). */
  METRICS_HOST: z
    .string()
    .refine(
      (v) =>
        ipaddr.isValid(v) ||
        /^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/.test(v),
      'expected an address (127.0.0.1, 0.0.0.0, ::) or a host name',
    )
    .default('127.0.0.1'),
  /**
   * Seconds a request has to arrive in full, headers and body, from its first byte (a connection's
   * first request: from the connection): past it, a 408 and the connection closed. Only the arrival
   * of the request is bounded, never the answer (a long MCP stream, a slow download).
   */
  REQUEST_BODY_TIMEOUT_SECONDS: z.coerce
    .number()
    .int('expected a whole number')
    .min(1, 'expected 1 to 3600')
    .max(3_600, 'expected 1 to 3600')
    .default(REQUEST_ARRIVAL_SECONDS),
  /** Seconds to let in-flight requests finish on SIGTERM before the process exits anyway. */
  SHUTDOWN_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(600).default(25),
  /**
   * Seconds the server goes on taking requests after SIGTERM, `/readyz` answering 503 `stopping` and
   * every answer `Connection: close`, so that a load balancer stops sending before it stops listening.
   */
  SHUTDOWN_DRAIN_SECONDS: z.coerce
    .number()
    .int('expected a whole number')
    .min(0, 'expected 0 to 300')
    .max(300, 'expected 0 to 300')
    .default(0),
  /**
   * Activity records a process holds while the database cannot take them (an outage, a restart); at
   * this many, calls that would be recorded are refused with 503 until the database takes them again
   * (docs/reliability.md, "postgres-restart").
   */
  ACTIVITY_SPOOL_MAX: z.coerce
    .number()
    .int('expected a whole number')
    .min(100, 'expected 100 or more')
    .default(ACTIVITY_SPOOL_MAX),
  /**
   * Worker threads that sanitise an edit's body ahead of its command (infra/sanitize-pool.ts), so that
   * the server's thread goes on with other requests meanwhile; 0: sanitise in the request's thread.
   */
  SANITIZE_THREADS: z.coerce.number().int('expected a whole number').min(0).max(64).default(1),
  /**
   * The text search configuration of article search (CONTRACT "Search"): how words are split and
   * stemmed and which are stop words. The articles' search vectors are made with it when they are
   * written: after a change, `npm run cli -- projections rebuild articles` makes them again.
   */
  SEARCH_LANGUAGE: z
    .enum(SEARCH_LANGUAGES, {
      message: `expected a PostgreSQL text search configuration: ${SEARCH_LANGUAGES.join(', ')}`,
    })
    .default(SEARCH_LANGUAGE_DEFAULT),
});

export type Config = Omit<z.infer<typeof ConfigSchema>, 'PUBLIC_URL' | 'MEDIA_DIR'> & {
  PUBLIC_URL: string;
  MEDIA_DIR: string;
};

export { ConfigError };

/**
 * Reads the environment; an empty string counts as unset. Every setting X may come from a file named
 * by X_FILE instead (its trailing newlines removed), as secrets mounted by a container engine are.
 * Throws a ConfigError naming the variable, never a file's content.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const input: Record<string, string> = {};
  const fromFile = new Map<string, string>();
  for (const key of Object.keys(ConfigSchema.shape)) {
    const value = settingOf(env, key);
    if (value === undefined) continue;
    input[key] = value.value;
    if (value.file !== undefined) fromFile.set(key, value.file);
  }
  /** How a message names a variable's value: as given, or only the file it was read from. */
  const shown = (name: string): string => {
    const file = fromFile.get(name);
    return file === undefined
      ? `${name}=${JSON.stringify(input[name] ?? '')}`
      : `${name} (from ${name}_FILE=${JSON.stringify(file)})`;
  };
  const parsed = ConfigSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const name = String(issue?.path[0] ?? 'environment');
    throw new ConfigError(`Invalid configuration: ${shown(name)}: ${issue?.message ?? 'invalid'}`);
  }
  const c = parsed.data;
  if (c.METRICS_PORT !== undefined && c.METRICS_PORT !== 0 && c.METRICS_PORT === c.PORT) {
    throw new ConfigError(
      `Invalid configuration: ${shown('METRICS_PORT')}: must differ from PORT (metrics are never served on the public port)`,
    );
  }
  if (c.DATABASE_REPLICA_URLS !== undefined && c.DATABASE_URL === undefined) {
    throw new ConfigError(
      'Invalid configuration: DATABASE_REPLICA_URLS is set without DATABASE_URL: read replicas are replicas of a PostgreSQL primary, not of the embedded database',
    );
  }
  const publicUrl = (c.PUBLIC_URL ?? `http://localhost:${c.PORT === 0 ? 3000 : c.PORT}`).replace(/\/+$/, '');
  return { ...c, PUBLIC_URL: publicUrl, MEDIA_DIR: c.MEDIA_DIR ?? path.join(c.DATA_DIR, 'media') };
}

/** X's value from X or from the file X_FILE names; undefined when neither is set (or both are empty). */
function settingOf(env: NodeJS.ProcessEnv, key: string): { value: string; file?: string } | undefined {
  const direct = env[key];
  const file = env[`${key}_FILE`];
  const set = (v: string | undefined): v is string => v !== undefined && v !== '';
  if (set(direct) && set(file)) {
    throw new ConfigError(`Invalid configuration: ${key} and ${key}_FILE are both set: set one of them`);
  }
  if (set(direct)) return { value: direct };
  if (!set(file)) return undefined;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ConfigError(
      `Invalid configuration: ${key}_FILE=${JSON.stringify(file)}: cannot read the file${code ? ` (${code})` : ''}`,
    );
  }
  const value = text.replace(/(\r?\n)+$/, '');
  return value === '' ? undefined : { value, file };
}

/** Whether a start on an empty database makes the demo account: DEMO_ON_FIRST_START, else only when embedded. */
export function demoOnFirstStart(config: Pick<Config, 'DEMO_ON_FIRST_START' | 'DATABASE_URL'>): boolean {
  return config.DEMO_ON_FIRST_START ?? config.DATABASE_URL === undefined;
}

/** For a process entry point: the configuration, or one line on stderr naming the bad variable and exit 1. */
export function loadConfigOrExit(env: NodeJS.ProcessEnv = process.env): Config {
  try {
    return loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}
