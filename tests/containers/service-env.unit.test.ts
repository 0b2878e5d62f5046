import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigSchema, loadConfig } from '../../infra/config.ts';
import { ROOT } from '../support/process.ts';

/*
 * The compose deployment's settings: every setting the service reads is set by compose.yaml or can be
 * set in its env file (containers/service.env), and the defaults that file states are the service's.
 */

const compose = readFileSync(join(ROOT, 'containers/compose.yaml'), 'utf8');
const envFile = readFileSync(join(ROOT, 'containers/service.env'), 'utf8');
const image = readFileSync(join(ROOT, 'containers/Containerfile'), 'utf8');

/** The `# NAME=value` lines of the env file: the settings it offers, with their stated defaults. */
const offered = new Map(
  envFile
    .split('\n')
    .map((line) => /^# ([A-Z][A-Z0-9_]*)=(.*)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => [m[1] as string, m[2] as string]),
);

/** The settings compose.yaml sets on the service, and those the image sets (`ENV NAME=value`). */
const setByCompose = new Set([
  ...[...compose.matchAll(/^ {4,6}([A-Z][A-Z0-9_]*): /gm)].map((m) => m[1] as string),
  ...[...image.matchAll(/^(?:ENV)?\s+([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1] as string),
]);

describe('the compose deployment’s settings', () => {
  it('offers every setting the service reads, in compose.yaml, the image or the env file', () => {
    const settings = Object.keys(ConfigSchema.shape);
    expect(offered.size).toBeGreaterThan(10);
    expect(settings.filter((name) => !offered.has(name) && !setByCompose.has(name))).toEqual([]);
  });

  it('names only settings there are (or OpenTelemetry’s own)', () => {
    const settings = new Set(Object.keys(ConfigSchema.shape));
    expect([...offered.keys()].filter((name) => !settings.has(name) && !name.startsWith('OTEL_'))).toEqual(
      [],
    );
  });

  it('states the service’s defaults', () => {
    const defaults = loadConfig({});
    for (const [name, value] of offered) {
      if (value === '' || name.startsWith('OTEL_')) continue;
      expect(loadConfig({ [name]: value }), name).toEqual(defaults);
    }
  });
});
