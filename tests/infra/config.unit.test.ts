import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, demoOnFirstStart, loadConfig } from '../../infra/config.ts';

describe('configuration', () => {
  it('has the CONTRACT defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      PORT: 3000,
      HOST: '127.0.0.1',
      DATA_DIR: './data',
      LOG_LEVEL: 'info',
      PUBLIC_URL: 'http://localhost:3000',
    });
    expect(c.DATABASE_URL).toBeUndefined();
    expect(c.REDIS_URL).toBeUndefined();
    expect(c.REQUEST_BODY_TIMEOUT_SECONDS).toBe(30);
    expect(c.SHUTDOWN_DRAIN_SECONDS).toBe(0);
  });

  it('derives PUBLIC_URL from PORT when unset (3000 when PORT is 0)', () => {
    expect(loadConfig({ PORT: '8080' }).PUBLIC_URL).toBe('http://localhost:8080');
    expect(loadConfig({ PORT: '0' }).PUBLIC_URL).toBe('http://localhost:3000');
    expect(loadConfig({ PORT: '8080', PUBLIC_URL: 'https://cs.example' }).PUBLIC_URL).toBe(
      'https://cs.example',
    );
  });

  it('reads SHUTDOWN_DRAIN_SECONDS from 0 to 300', () => {
    expect(loadConfig({ SHUTDOWN_DRAIN_SECONDS: '5' }).SHUTDOWN_DRAIN_SECONDS).toBe(5);
    expect(() => loadConfig({ SHUTDOWN_DRAIN_SECONDS: '301' })).toThrow(
      /SHUTDOWN_DRAIN_SECONDS="301": expected 0 to 300/,
    );
    expect(() => loadConfig({ SHUTDOWN_DRAIN_SECONDS: '-1' })).toThrow(/expected 0 to 300/);
  });

  it("reads SEARCH_LANGUAGE as one of PostgreSQL's text search configurations, english by default", () => {
    expect(loadConfig({}).SEARCH_LANGUAGE).toBe('english');
    expect(loadConfig({ SEARCH_LANGUAGE: 'german' }).SEARCH_LANGUAGE).toBe('german');
    expect(() => loadConfig({ SEARCH_LANGUAGE: 'klingon' })).toThrow(
      /SEARCH_LANGUAGE="klingon": expected a PostgreSQL text search configuration: simple, arabic/,
    );
  });

  it('reads REQUEST_BODY_TIMEOUT_SECONDS in whole seconds', () => {
    expect(loadConfig({ REQUEST_BODY_TIMEOUT_SECONDS: '2' }).REQUEST_BODY_TIMEOUT_SECONDS).toBe(2);
  });

  it("lets 4 of an account's large requests wait by default, HEAVY_WAITING_PER_ACCOUNT another number", () => {
    expect(loadConfig({}).HEAVY_WAITING_PER_ACCOUNT).toBe(4);
    expect(loadConfig({ HEAVY_WAITING_PER_ACCOUNT: '16' }).HEAVY_WAITING_PER_ACCOUNT).toBe(16);
  });

  it('runs the housekeeping jobs in the server unless RUN_JOBS is false', () => {
    expect(loadConfig({}).RUN_JOBS).toBe(true);
    expect(loadConfig({ RUN_JOBS: 'false' }).RUN_JOBS).toBe(false);
  });

  it('makes the first start demo account on the embedded database only, unless DEMO_ON_FIRST_START says', () => {
    const pg = { DATABASE_URL: 'postgres://db.example/cs' };
    expect(demoOnFirstStart(loadConfig({}))).toBe(true);
    expect(demoOnFirstStart(loadConfig({ DEMO_ON_FIRST_START: 'false' }))).toBe(false);
    expect(demoOnFirstStart(loadConfig(pg))).toBe(false);
    expect(demoOnFirstStart(loadConfig({ ...pg, DEMO_ON_FIRST_START: 'true' }))).toBe(true);
  });

  it('treats an empty variable as unset and trims a trailing slash from PUBLIC_URL', () => {
    const c = loadConfig({ DATABASE_URL: '', PUBLIC_URL: 'https://content.example.com/' });
    expect(c.DATABASE_URL).toBeUndefined();
    expect(c.PUBLIC_URL).toBe('https://content.example.com');
  });

  it.each([
    ['PORT', 'eighty', /PORT="eighty": expected a port number/],
    ['PORT', '70000', /PORT="70000": expected 0\.\.65535/],
    ['DATABASE_URL', 'mysql://x', /DATABASE_URL="mysql:\/\/x": expected a postgres/],
    ['REDIS_URL', 'localhost:6379', /REDIS_URL=.*expected a redis/],
    ['PUBLIC_URL', 'ftp://x', /PUBLIC_URL=.*expected an http/],
    ['LOG_LEVEL', 'loud', /LOG_LEVEL="loud"/],
    ['RUN_WORKERS', 'maybe', /RUN_WORKERS="maybe": expected true or false/],
    ['TRUST_PROXY', 'true', /TRUST_PROXY="true": expected a hop count .*not an address: true/],
    ['TRUST_PROXY', '0', /TRUST_PROXY="0": expected a hop count from 1 to 10/],
    ['TRUST_PROXY', '10.0.0.0/8, proxy.example', /not an address: proxy\.example/],
    ['RUN_JOBS', 'often', /RUN_JOBS="often": expected true or false/],
    ['DEMO_ON_FIRST_START', 'sure', /DEMO_ON_FIRST_START="sure": expected true or false/],
    ['HEAVY_WAITING_PER_ACCOUNT', '0', /HEAVY_WAITING_PER_ACCOUNT="0": expected 1 or more/],
    ['HEAVY_WAITING_PER_ACCOUNT', '65', /HEAVY_WAITING_PER_ACCOUNT="65": expected at most 64/],
    ['REQUEST_BODY_TIMEOUT_SECONDS', '0', /REQUEST_BODY_TIMEOUT_SECONDS="0": expected 1 to 3600/],
    ['REQUEST_BODY_TIMEOUT_SECONDS', '2.5', /REQUEST_BODY_TIMEOUT_SECONDS="2\.5": expected a whole number/],
    ['REQUEST_BODY_TIMEOUT_SECONDS', 'soon', /REQUEST_BODY_TIMEOUT_SECONDS="soon"/],
  ])('refuses a bad %s in one line that names it', (name, value, message) => {
    let error: unknown;
    try {
      loadConfig({ [name]: value });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain('\n');
  });

  it('reads TRUST_PROXY as a hop count or a list of proxy addresses; unset trusts nobody', () => {
    expect(loadConfig({}).TRUST_PROXY).toBeUndefined();
    expect(loadConfig({ TRUST_PROXY: '2' }).TRUST_PROXY).toBe(2);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 192.168.1.7,loopback' }).TRUST_PROXY).toEqual([
      '10.0.0.0/8',
      '192.168.1.7',
      'loopback',
    ]);
  });
});

describe('settings from files (X_FILE)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cs-config-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, content: string): string => {
    const at = join(dir, name);
    writeFileSync(at, content);
    return at;
  };

  it("reads a setting's value from the file X_FILE names, without its trailing newlines", () => {
    const url = file('database-url', 'postgres://cs:s3cret@db.example/cs\n\n');
    const c = loadConfig({ DATABASE_URL_FILE: url, PORT_FILE: file('port', '8080\r\n') });
    expect(c.DATABASE_URL).toBe('postgres://cs:s3cret@db.example/cs');
    expect(c.PORT).toBe(8080);
  });

  it('treats an empty file as unset, as an empty variable is', () => {
    expect(loadConfig({ REDIS_URL_FILE: file('empty', '\n') }).REDIS_URL).toBeUndefined();
    expect(loadConfig({ REDIS_URL: '', REDIS_URL_FILE: '' }).REDIS_URL).toBeUndefined();
  });

  it('refuses X and X_FILE both set, naming both', () => {
    expect(() => loadConfig({ REDIS_URL: 'redis://a', REDIS_URL_FILE: file('redis', 'redis://b') })).toThrow(
      new ConfigError('Invalid configuration: REDIS_URL and REDIS_URL_FILE are both set: set one of them'),
    );
  });

  it('refuses an unreadable file, naming the variable and the path', () => {
    const missing = join(dir, 'missing');
    expect(() => loadConfig({ DATABASE_URL_FILE: missing })).toThrow(
      new ConfigError(`Invalid configuration: DATABASE_URL_FILE="${missing}": cannot read the file (ENOENT)`),
    );
    expect(() => loadConfig({ DATABASE_URL_FILE: dir })).toThrow(
      /DATABASE_URL_FILE=".*": cannot read the file \(EISDIR\)/,
    );
    if (process.getuid?.() !== 0) {
      const closed = file('closed', 'postgres://db.example/cs');
      chmodSync(closed, 0o000);
      expect(() => loadConfig({ DATABASE_URL_FILE: closed })).toThrow(/cannot read the file \(EACCES\)/);
    }
  });

  it('names the file, never its content, when the value in it is bad', () => {
    const bad = file('bad-url', 'mysql://cs:s3cret@db.example/cs\n');
    let error: unknown;
    try {
      loadConfig({ DATABASE_URL_FILE: bad });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toBe(
      `Invalid configuration: DATABASE_URL (from DATABASE_URL_FILE="${bad}"): expected a postgres:// or postgresql:// URL`,
    );
    expect(() => loadConfig({ PORT: '9464', METRICS_PORT_FILE: file('metrics-port', '9464') })).toThrow(
      `Invalid configuration: METRICS_PORT (from METRICS_PORT_FILE="${join(dir, 'metrics-port')}"): must differ from PORT`,
    );
  });
});
