import { type Browser, chromium } from 'playwright-core';

/**
 * Debian's headless Chromium, as every page test drives it: no sandbox (the tests run as root) and no
 * background networking (this machine's closed network refuses those connections, many at a time).
 */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-background-networking'],
    headless: true,
  });
}
