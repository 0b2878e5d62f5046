import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../infra/config.ts';

/* METRICS_PORT and METRICS_HOST (CONTRACT "Configuration"; docs/operations.md "Metrics"). */

describe('the metrics configuration', () => {
  it('has no metrics by default, and binds loopback when a port is given', () => {
    const off = loadConfig({});
    expect(off.METRICS_PORT).toBeUndefined();
    expect(off.METRICS_HOST).toBe('127.0.0.1');
    expect(loadConfig({ METRICS_PORT: '9464' })).toMatchObject({
      METRICS_PORT: 9464,
      METRICS_HOST: '127.0.0.1',
    });
    expect(loadConfig({ METRICS_PORT: '9464', METRICS_HOST: '0.0.0.0' }).METRICS_HOST).toBe('0.0.0.0');
    expect(loadConfig({ METRICS_PORT: '0', METRICS_HOST: '::' }).METRICS_HOST).toBe('::');
    expect(loadConfig({ METRICS_PORT: '9464', METRICS_HOST: 'metrics.internal' }).METRICS_HOST).toBe(
      'metrics.internal',
    );
    // Empty counts as unset, as for every variable.
    expect(loadConfig({ METRICS_PORT: '' }).METRICS_PORT).toBeUndefined();
  });

  it('stops the start on a bad value with a message naming the variable', () => {
    expect(() => loadConfig({ METRICS_PORT: 'ninety' })).toThrow(
      /METRICS_PORT="ninety": expected a port number/,
    );
    expect(() => loadConfig({ METRICS_PORT: '70000' })).toThrow(/METRICS_PORT="70000": expected 0\.\.65535/);
    expect(() => loadConfig({ METRICS_PORT: '94.5' })).toThrow(
      /METRICS_PORT="94.5": expected a whole number/,
    );
    expect(() => loadConfig({ METRICS_PORT: '9464', METRICS_HOST: 'http://x/' })).toThrow(
      /METRICS_HOST="http:\/\/x\/": expected an address/,
    );
  });

  it('never serves metrics on the public port', () => {
    expect(() => loadConfig({ PORT: '8080', METRICS_PORT: '8080' })).toThrow(
      /METRICS_PORT="8080": must differ from PORT/,
    );
    expect(() => loadConfig({ METRICS_PORT: '3000' })).toThrow(/must differ from PORT/);
    // Both free ports chosen by the system are two ports.
    expect(loadConfig({ PORT: '0', METRICS_PORT: '0' }).METRICS_PORT).toBe(0);
  });
});
