import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DISABLE_FEATURES,
  launchBrowser,
  OMNIBOX_POPUP_FEATURES,
  PLAYWRIGHT_DISABLED_FEATURES,
} from './browser.ts';

/*
 * The page tests' Chromium (tests/support/browser.ts): started with one `--disable-features` switch
 * that keeps Playwright's own list and adds the omnibox popup's features, and without that popup.
 */
describe('the page tests’ Chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it("starts with one --disable-features switch: Playwright's features and the omnibox popup's", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto('chrome://version');
    const commandLine = (await page.locator('#command_line').textContent()) ?? '';
    const switches = commandLine.match(/--disable-features=\S+/g) ?? [];
    // Two switches here mean playwright-core's own list changed (an upgrade): copy its
    // `disabledFeatures` into PLAYWRIGHT_DISABLED_FEATURES, or Chromium reads only the last switch.
    expect(switches, commandLine).toEqual([DISABLE_FEATURES]);
    const features = (switches[0] ?? '').slice('--disable-features='.length).split(',');
    expect(features).toEqual(
      expect.arrayContaining([...PLAYWRIGHT_DISABLED_FEATURES, ...OMNIBOX_POPUP_FEATURES]),
    );
    await context.close();
  });

  it('opens a context with its page and no omnibox popup beside it', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto('data:text/html,<title>One page</title><p>One page</p>');
    const session = await browser.newBrowserCDPSession();
    const { targetInfos } = await session.send('Target.getTargets');
    await session.detach();
    const urls = targetInfos.map((t) => t.url);
    expect(urls.some((url) => url.startsWith('data:text/html'))).toBe(true);
    expect(urls.filter((url) => url.startsWith('chrome://omnibox-popup'))).toEqual([]);
    await context.close();
  });
});
