import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectAccessible } from '../support/axe.ts';
import { PATIENCE } from '../support/wait.ts';
import { screenshot, signIn, startWebApp, type WebApp } from '../support/web.ts';

/*
 * The editor with JavaScript on: the rich editor (TipTap, bundled at install) replaces the textarea,
 * with a toolbar; protected blocks are atoms that no keystroke removes, and every refusal says why in
 * a live region; deleting a selection keeps its blocks and says so; a refused save puts the blocks
 * back on request; Ctrl/Cmd+S saves, Enter in the title does not, and leaving unsaved work asks
 * first; saving is the same edit as the plain form.
 */
describe('the rich editor, JavaScript on', () => {
  let web: WebApp;
  let context: BrowserContext;
  let page: Page;
  let articleId: string;
  let protectedBefore: ProtectedLink[];
  const errors: string[] = [];

  type ProtectedLink = { id: string; kind: string; href: string; text: string };
  type Article = { title: string; body: string; revision: number; protected_links: ProtectedLink[] };
  const article = async (id = articleId): Promise<Article> =>
    (await (await web.api(`/articles/${id}`)).json()) as Article;

  const content = () => page.locator('.rich-editor-content');
  const blocks = () => page.locator('[contenteditable=true] [data-service-protected]');
  const status = () => page.locator('#rich-editor-status[role=status][aria-live=polite]');

  /**
   * Waits for a save made in place to say it made revision n: the line under the buttons (a live
   * region) and the notice above the form; the revision shown and the form's expected revision follow.
   */
  async function savedAs(n: number, on = page): Promise<void> {
    await on
      .waitForSelector(`#save-status[role=status]:has-text("Saved as revision ${n}.")`)
      .catch(async (e) => {
        throw new Error(`${e}\nthe status says: ${await on.textContent('#save-status')}`);
      });
    expect(await on.textContent('#editor-notice')).toContain(`Saved as revision ${n}.`);
    expect(await on.textContent('#editor-revision')).toContain(`Revision ${n}`);
    expect(await on.inputValue('input[name=expected_revision]')).toBe(String(n));
  }

  /** Opens the editor and waits for the rich editor. */
  async function openEditor(id = articleId): Promise<void> {
    await page.goto(`${web.url}/articles/${id}/edit`);
    await page.waitForSelector('.rich-editor-content');
    // A draft an earlier test left unsaved is offered above the form: these tests start afresh.
    if ((await page.locator('#draft-discard').count()) > 0) await page.click('#draft-discard');
  }

  /**
   * Puts the cursor at the end of the body's first heading with a click just inside its last letter,
   * once the editor has it there: the editor reads the page's selection on `selectionchange`, an event
   * that comes after the click (and a key pressed at once may come before it); the toolbar's
   * "Heading 2" is pressed when it has.
   */
  async function cursorInHeading(): Promise<void> {
    const end = (await page.evaluate(`(() => {
      const range = document.createRange();
      range.selectNodeContents(document.querySelector('.rich-editor-content h2'));
      const last = [...range.getClientRects()].at(-1);
      return { x: last.right - 1, y: last.top + last.height / 2 };
    })()`)) as { x: number; y: number };
    await page.mouse.click(end.x, end.y);
    await page.waitForSelector('#tool-h2[aria-pressed=true]');
  }

  beforeAll(async () => {
    web = await startWebApp();
    const list = (await (await web.api(`/sites/${web.demo.sites[0]?.id}/articles`)).json()) as {
      data: { id: string }[];
    };
    for (const { id } of list.data) {
      articleId = id;
      protectedBefore = (await article()).protected_links;
      if (protectedBefore.length > 0) break;
    }
    expect(protectedBefore.length).toBeGreaterThan(0);
    context = await web.signedIn({ javaScript: true, width: 1280 });
    page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    page.on('pageerror', (e) => errors.push(String(e)));
  });
  afterAll(async () => {
    await web?.stop();
  });

  it('replaces the textarea with the rich editor and its toolbar, protected links shown as blocks', async () => {
    await openEditor();
    expect(await page.isHidden('textarea#body')).toBe(true);
    expect(await page.getAttribute('form.editor-form', 'data-rich-editor')).toBe('on');
    expect(await blocks().count()).toBe(protectedBefore.length);
    // The hint fits the mode: the text and its toolbar, not the article's HTML.
    const help = await page.textContent('#body-help');
    expect(help).toContain('toolbar');
    expect(help).not.toContain('HTML');
    expect(await page.textContent('label[for="body"]')).toBe('Body');
    expect(errors).toEqual([]);
    await screenshot(page, 'rich-editor');
    await expectAccessible(page, 'the rich editor');
    const phone = await (await web.signedIn({ javaScript: true, width: 390 })).newPage();
    await phone.goto(`${web.url}/articles/${articleId}/edit`);
    await phone.waitForSelector('.rich-toolbar');
    await screenshot(phone, 'rich-editor-phone');
    expect(await phone.$eval('html', (root) => root.scrollWidth)).toBeLessThanOrEqual(390);
  });

  it('cleans pasted HTML to what the server allows: a pasted protected marker is an ordinary link, no image, no handler', async () => {
    errors.length = 0;
    await openEditor();
    await cursorInHeading();
    const pasted =
      '<a data-service-protected="backlink" data-service-id="bl_pasted" href="https://pasted.example/">' +
      '<img src="x" onerror="window.pwned = 1">Pasted link</a> <script>window.pwned = 2</script>' +
      '<b onclick="window.pwned = 3">and bold</b>';
    await paste(page, pasted, 'Pasted link and bold');
    await content().locator('a', { hasText: 'Pasted link' }).waitFor();
    expect(await content().locator('img').count()).toBe(0);
    expect(await content().locator('[onerror], [onclick], script').count()).toBe(0);
    const link = content().locator('a', { hasText: 'Pasted link' });
    expect(await link.getAttribute('href')).toBe('https://pasted.example/');
    expect(await link.getAttribute('data-service-protected')).toBeNull();
    expect(await link.getAttribute('data-service-id')).toBeNull();
    // The blocks of the body as loaded are still the only atoms (ProseMirror makes a leaf node uneditable).
    expect(await content().locator('[data-service-protected]').count()).toBe(protectedBefore.length);
    expect(await content().locator('[data-service-protected][contenteditable="false"]').count()).toBe(
      protectedBefore.length,
    );
    expect(await content().locator('[contenteditable="false"]').count()).toBe(protectedBefore.length);
    expect(await page.evaluate('window.pwned')).toBeUndefined();
    expect(await content().textContent()).toContain('Pasted link');
    expect(await content().textContent()).toContain('and bold');
    // Chromium checks the page's policy as it parses a handler attribute, even in the inert document
    // the pasted HTML is cleaned in: one report per handler of the clipboard, nothing run (no pwned).
    const blocked = (e: string) => e.startsWith('Executing inline event handler violates');
    expect(errors.filter(blocked)).toHaveLength(2);
    expect(errors.filter((e) => !blocked(e))).toEqual([]);
  });

  it("pastes a copy of a protected link, as the editor's own copy puts it on the clipboard, as an ordinary link that can be deleted", async () => {
    errors.length = 0;
    await openEditor();
    const first = protectedBefore[0] as ProtectedLink;
    await blocks().first().click();
    const copied = await clipboard(page, 'copy', 'text/html');
    expect(copied).toContain('data-service-protected');
    await cursorInHeading();
    await paste(page, copied, first.text);
    const pastedCopy = content().locator('h2 a', { hasText: first.text });
    await expect.poll(() => pastedCopy.count(), PATIENCE).toBe(1);
    expect(await pastedCopy.getAttribute('data-service-protected')).toBeNull();
    expect(await blocks().count()).toBe(protectedBefore.length);
    // The copy goes with Backspace, letter by letter, as any text does; the blocks stay.
    for (let i = 0; i < first.text.length; i++) await page.keyboard.press('Backspace');
    await expect.poll(() => pastedCopy.count(), PATIENCE).toBe(0);
    expect(await blocks().count()).toBe(protectedBefore.length);
    expect(errors).toEqual([]);
  });

  it('makes a protected link dragged with the copy key (Ctrl) an ordinary link: the one that was there stays the block', async () => {
    errors.length = 0;
    await openEditor();
    const block = blocks().first();
    const text = (await block.textContent()) ?? '';
    const target = await content().locator('h2').first().boundingBox();
    if (!target) throw new Error('no heading to drop on');
    // A drag as the browser delivers it: dragstart on the block with Ctrl held, a drop at the heading's end.
    await page.evaluate(`(() => {
      const options = { dataTransfer: new DataTransfer(), bubbles: true, cancelable: true, ctrlKey: true };
      const block = document.querySelector('.rich-editor-content [data-service-protected]');
      block.dispatchEvent(new DragEvent('dragstart', options));
      const drop = { ...options, clientX: ${target.x + target.width - 2}, clientY: ${target.y + target.height / 2} };
      document.querySelector('.rich-editor-content h2').dispatchEvent(new DragEvent('drop', drop));
    })()`);
    const copy = content().locator('h2 a', { hasText: text });
    await expect.poll(() => copy.count(), PATIENCE).toBe(1);
    expect(await copy.getAttribute('data-service-protected')).toBeNull();
    expect(await blocks().count()).toBe(protectedBefore.length);
    expect(await blocks().first().textContent()).toBe(text);
    expect(errors).toEqual([]);
  });

  it('refuses Backspace and Delete on a protected link, saying why and naming it, visibly and in a live region', async () => {
    errors.length = 0;
    await openEditor();
    const first = protectedBefore[0] as ProtectedLink;
    await blocks().first().click();
    await page.keyboard.press('Backspace');
    await expect
      .poll(() => status().textContent(), PATIENCE)
      .toContain(`“${first.text}” (${first.href}) is a protected link`);
    expect(await status().isVisible()).toBe(true);
    expect(await blocks().count()).toBe(protectedBefore.length);
    await screenshot(page, 'rich-editor-refused');
    // The cursor just after the block: Backspace would take it.
    await page.keyboard.press('ArrowRight');
    await page.evaluate("document.querySelector('#rich-editor-status').textContent = ''");
    await page.keyboard.press('Backspace');
    await expect.poll(() => status().textContent(), PATIENCE).toContain(first.text);
    expect(await blocks().count()).toBe(protectedBefore.length);
    // Typing over the block alone, or cutting it, is refused the same way (a cut still copies it).
    await blocks().first().click();
    await page.keyboard.type('x');
    await expect.poll(() => status().textContent(), PATIENCE).toContain('Not deleted');
    expect(await blocks().count()).toBe(protectedBefore.length);
    await page.evaluate("document.querySelector('#rich-editor-status').textContent = ''");
    await blocks().first().click();
    expect(await clipboard(page, 'cut', 'text/plain')).toBe(first.text);
    await expect.poll(() => status().textContent(), PATIENCE).toContain(`“${first.text}”`);
    expect(await blocks().count()).toBe(protectedBefore.length);
    expect(errors).toEqual([]);
  });

  it('shows a refusal where it is seen: in the window, wherever the caret is, at 1280x900 and on a phone', async () => {
    errors.length = 0;
    for (const [width, height] of [
      [1280, 900],
      [390, 844],
    ] as const) {
      const context = await web.signedIn({ javaScript: true, width });
      const seen = await context.newPage();
      await seen.setViewportSize({ width, height });
      await seen.goto(`${web.url}/articles/${articleId}/edit`);
      await seen.waitForSelector('.rich-editor-content');
      // The first block, near the top of the text: the line under the editor is far below the window.
      const block = seen.locator('[contenteditable=true] [data-service-protected]').first();
      await block.scrollIntoViewIfNeeded();
      await block.click();
      const line = seen.locator('#rich-editor-status');
      const natural = await line.evaluate((element) => {
        const box = element.parentElement?.querySelector('.rich-editor')?.getBoundingClientRect();
        return box ? box.bottom : 0;
      });
      expect(natural).toBeGreaterThan(height);
      await seen.keyboard.press('Backspace');
      await expect.poll(() => line.textContent(), PATIENCE).toContain('Not deleted');
      const box = await line.boundingBox();
      expect(box).not.toBeNull();
      if (!box) return;
      expect(box.y).toBeGreaterThanOrEqual(0);
      expect(box.y + box.height).toBeLessThanOrEqual(height);
      expect(box.x + box.width).toBeLessThanOrEqual(width);
      // Seen, and still the live region a screen reader reads.
      expect(await line.getAttribute('role')).toBe('status');
      expect(
        await seen.evaluate(
          `document.elementFromPoint(${box.x + box.width / 2}, ${box.y + box.height / 2})?.id`,
        ),
      ).toBe('rich-editor-status');
      await screenshot(seen, `rich-editor-refused-in-view-${width}`);
      // The next change of the text clears it.
      await seen.keyboard.press('ArrowRight');
      await seen.keyboard.type('x');
      await expect.poll(() => line.textContent(), PATIENCE).toBe('');
      await context.close();
    }
    expect(errors).toEqual([]);
  });

  it('deletes everything selected but the protected links with select-all and Backspace, says so, and undoes', async () => {
    errors.length = 0;
    await openEditor();
    await page.click('.rich-editor-content p');
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.press('Backspace');
    await expect
      .poll(() => status().textContent(), PATIENCE)
      .toContain('Deleted the selection but its protected');
    expect(await blocks().count()).toBe(protectedBefore.length);
    const left = (await content().textContent())?.replace(/\s+/g, '');
    expect(left).toBe(protectedBefore.map((l) => l.text.replace(/\s+/g, '')).join(''));
    // The links kept stand apart, a space between each, as a person reads them.
    expect(await content().textContent()).toBe(protectedBefore.map((l) => l.text).join(' '));
    for (const link of protectedBefore) expect(await status().textContent()).toContain(link.text);
    await screenshot(page, 'rich-editor-select-all-deleted');
    await page.keyboard.press('ControlOrMeta+Z');
    await expect
      .poll(async () => (await content().textContent())?.length, PATIENCE)
      .toBeGreaterThan(left?.length ?? 0);
    // Typing over everything: the same, with the typed text in place of the rest.
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.type('Fresh start');
    await expect.poll(() => content().textContent(), PATIENCE).toContain('Fresh start');
    expect(await blocks().count()).toBe(protectedBefore.length);
    // Cut: the selection goes to the clipboard whole, the blocks stay in the text.
    await page.keyboard.press('ControlOrMeta+A');
    const cut = await clipboard(page, 'cut', 'text/plain');
    expect(cut).toContain('Fresh start');
    await expect.poll(() => content().textContent(), PATIENCE).not.toContain('Fresh start');
    expect(await blocks().count()).toBe(protectedBefore.length);
    expect(await content().textContent()).toBe(protectedBefore.map((l) => l.text).join(' '));
    // What is kept is an edit the service accepts: Check changes says saving it would make a revision.
    await Promise.all([page.waitForNavigation(), page.click('button[formaction$="/preview"]')]);
    expect(await page.textContent('#check-verdict')).toContain('Saving this would make revision');
    expect(await page.locator('#check-protected').count()).toBe(0);
    expect(errors).toEqual([]);
  });

  it('saves what was typed as a revision of the editor in place, every protected link intact, and says so', async () => {
    errors.length = 0;
    const before = await article();
    await openEditor();
    await cursorInHeading();
    await page.keyboard.type(' Typed in the rich editor.');
    await page.fill('#reason', 'Rich editor test');
    const dialogs: string[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.type());
      void d.dismiss();
    });
    await page.click('form.editor-form button.primary');
    await savedAs(before.revision + 1);
    expect(dialogs).toEqual([]);
    expect(new URL(page.url()).pathname).toBe(`/articles/${articleId}/edit`);
    const after = await article();
    expect(after.revision).toBe(before.revision + 1);
    expect(after.body).toContain('Typed in the rich editor.');
    expect(after.protected_links).toEqual(protectedBefore);
    const revisions = (await (await web.api(`/articles/${articleId}/revisions?per_page=1`)).json()) as {
      data: { origin: string; actor: { type: string }; reason: string }[];
    };
    expect(revisions.data[0]).toMatchObject({
      origin: 'editor',
      actor: { type: 'user' },
      reason: 'Rich editor test',
    });
    page.removeAllListeners('dialog');
    expect(errors).toEqual([]);
  });

  it('saves with Ctrl/Cmd+S; Enter in the title goes to the body and sends nothing', async () => {
    errors.length = 0;
    const before = await article();
    await openEditor();
    const posts: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST') posts.push(r.url());
    });
    await page.focus('#title');
    await page.keyboard.press('End');
    await page.keyboard.type(' (saved with the keyboard)');
    await page.keyboard.press('Enter');
    expect(await page.evaluate('document.activeElement?.id')).toBe('rich-editor-content');
    await page.keyboard.type('Typed after Enter. ');
    expect(posts).toEqual([]);
    await page.keyboard.press('ControlOrMeta+S');
    await savedAs(before.revision + 1);
    expect(posts).toHaveLength(1);
    const after = await article();
    expect(after.body).toContain('Typed after Enter.');
    page.removeAllListeners('request');
  });

  it('asks before leaving with unsaved changes, and only then', async () => {
    await openEditor();
    const dialogs: string[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.type());
      void d.dismiss();
    });
    // Nothing changed: the link leaves at once.
    await Promise.all([page.waitForNavigation(), page.click('text=Back to the article')]);
    expect(dialogs).toEqual([]);
    await openEditor();
    await cursorInHeading();
    await page.keyboard.type(' unsaved');
    await page.click('text=Back to the article');
    await expect.poll(() => dialogs, PATIENCE).toEqual(['beforeunload']);
    // Dismissed: the person stays, the text too.
    expect(new URL(page.url()).pathname).toBe(`/articles/${articleId}/edit`);
    expect(await content().textContent()).toContain('unsaved');
    page.removeAllListeners('dialog');
    page.on('dialog', (d) => void d.accept());
    await Promise.all([page.waitForNavigation(), page.click('text=Back to the article')]);
    page.removeAllListeners('dialog');
  });

  it('has a toolbar that is one tab stop, moved in with the arrow keys, every button working from the keyboard', async () => {
    errors.length = 0;
    await openEditor();
    // One stop between the title and the text.
    // One stop between the body's hint (its link to the protected links) and the text.
    await page.focus('#body-help a');
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement?.id')).toBe('tool-h2');
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement?.id')).toBe('rich-editor-content');
    const tools = await page.$$eval('.rich-toolbar[role=toolbar] button', (bs) =>
      bs.map((b) => ({
        id: b.id,
        label: b.getAttribute('aria-label'),
        title: b.title,
        pressed: b.getAttribute('aria-pressed'),
        tabindex: b.tabIndex,
      })),
    );
    expect(tools.map((t) => t.id)).toEqual([
      'tool-h2',
      'tool-h3',
      'tool-bold',
      'tool-italic',
      'tool-bullets',
      'tool-numbers',
      'tool-quote',
      'tool-link',
      'tool-undo',
      'tool-redo',
    ]);
    for (const t of tools) expect(t.title).toMatch(/^.+ \((Ctrl|⌘).+\)$/);
    expect(tools.find((t) => t.id === 'tool-bold')?.title).toBe('Bold (Ctrl+B)');
    expect(tools.find((t) => t.id === 'tool-bold')?.label).toBe('Bold');
    expect(tools.filter((t) => t.tabindex === 0).map((t) => t.id)).toEqual(['tool-h2']);

    // A paragraph of its own, selected before each button, then each toggle on and off from the toolbar.
    await cursorInHeading();
    await page.keyboard.press('Enter');
    await page.keyboard.type('Formatted');
    await content().getByText('Formatted', { exact: true }).click();
    await page.keyboard.press('End');
    await page.keyboard.press('Shift+Home');
    await expect.poll(() => page.evaluate('getSelection().toString()'), PATIENCE).toBe('Formatted');
    /**
     * Goes to the toolbar, to a button with the arrow keys from the first, presses it with Enter (or
     * Space), and back to the text with Escape, where the selection is as it was.
     */
    const press = async (id: string, key = 'Enter'): Promise<void> => {
      // To the toolbar: Alt+F10 (Shift+Tab in a list item lifts the item, as in every editor).
      await page.keyboard.press('Alt+F10');
      await page.keyboard.press('Home');
      for (let i = 0; i < 12; i++) {
        if ((await page.evaluate('document.activeElement?.id')) === id) break;
        await page.keyboard.press('ArrowRight');
      }
      expect(await page.evaluate('document.activeElement?.id')).toBe(id);
      await page.keyboard.press(key);
      if (id !== 'tool-link') {
        await page.keyboard.press('Escape');
        await expect
          .poll(() => page.evaluate('document.activeElement?.id'), PATIENCE)
          .toBe('rich-editor-content');
      }
    };
    const toggles: [string, string][] = [
      ['tool-h2', 'h2'],
      ['tool-h3', 'h3'],
      ['tool-bold', 'strong'],
      ['tool-italic', 'em'],
      ['tool-bullets', 'ul'],
      ['tool-numbers', 'ol'],
      ['tool-quote', 'blockquote'],
    ];
    for (const [id, tag] of toggles) {
      const formatted = content().locator(tag, { hasText: 'Formatted' });
      await press(id);
      expect(await formatted.count(), id).toBe(1);
      expect(await page.getAttribute(`#${id}`, 'aria-pressed'), id).toBe('true');
      await press(id, ' ');
      expect(await formatted.count(), id).toBe(0);
      expect(await page.getAttribute(`#${id}`, 'aria-pressed'), id).toBe('false');
    }
    await screenshot(page, 'rich-editor-toolbar');
    // Undo and Redo: bold on, undone, redone.
    await press('tool-bold');
    const bold = content().locator('strong', { hasText: 'Formatted' });
    expect(await bold.count()).toBe(1);
    await press('tool-undo');
    expect(await bold.count()).toBe(0);
    await press('tool-redo');
    expect(await bold.count()).toBe(1);
    await press('tool-undo');

    // A link: the dialog asks for the address, refuses anything but http(s), then sets it.
    await press('tool-link');
    const dialog = page.locator('dialog#link-dialog[open]');
    await dialog.waitFor();
    expect(await page.evaluate('document.activeElement?.id')).toBe('link-href');
    expect(await dialog.locator('label[for=link-href]').textContent()).toContain('Address');
    await page.keyboard.type('javascript:alert(1)');
    await page.keyboard.press('Enter');
    await expect
      .poll(() => dialog.locator('#link-error').textContent(), PATIENCE)
      .toContain('http:// or https://');
    await screenshot(page, 'rich-editor-link-dialog');
    await expectAccessible(page, 'the link dialog');
    await page.fill('#link-href', 'https://example.com/formatted');
    await page.keyboard.press('Enter');
    const link = content().locator('a[href="https://example.com/formatted"]');
    await link.waitFor();
    expect(await link.textContent()).toContain('Formatted');
    expect(await page.isVisible('dialog#link-dialog')).toBe(false);
    // Changed, then removed, with the same dialog (Ctrl/Cmd+K).
    await link.click();
    await page.keyboard.press('ControlOrMeta+K');
    await dialog.waitFor();
    expect(await page.inputValue('#link-href')).toBe('https://example.com/formatted');
    await page.fill('#link-href', 'https://example.com/changed');
    await page.keyboard.press('Enter');
    const changed = content().locator('a[href="https://example.com/changed"]');
    await changed.waitFor();
    await changed.click();
    await page.keyboard.press('ControlOrMeta+K');
    await dialog.waitFor();
    await page.click('dialog#link-dialog >> text=Remove link');
    await expect.poll(() => changed.count(), PATIENCE).toBe(0);
    expect(await content().textContent()).toContain('Formatted');

    // A protected link is not the link tool's: refused, named.
    const first = protectedBefore[0] as ProtectedLink;
    await blocks().first().click();
    await page.keyboard.press('ControlOrMeta+K');
    await expect
      .poll(() => status().textContent(), PATIENCE)
      .toContain(`The link tool cannot change this: “${first.text}”`);
    expect(await page.isVisible('dialog#link-dialog')).toBe(false);
    expect(errors).toEqual([]);
    // Leaving without saving.
    page.on('dialog', (d) => void d.accept());
  });

  it('offers to put the protected links back after a refused save, in the rich editor too', async () => {
    errors.length = 0;
    const [site] = web.demo.sites;
    const list = (await (await web.api(`/sites/${site?.id}/articles?per_page=100`)).json()) as {
      data: { id: string }[];
    };
    // Another article, its text as the API left it: in the HTML form (the page's script held back),
    // one protected link removed and an exact copy of another added, then sent; the refusal page
    // has the rich editor, where only the article's own blocks are blocks: the copy is a link.
    let other: (Article & { id: string }) | undefined;
    for (const { id } of list.data) {
      const a = { ...(await article(id)), id };
      if (id !== articleId && a.protected_links.length > 1) other = a;
    }
    if (!other) throw new Error('the seed has too few articles with protected links');
    const [link, kept] = other.protected_links as [ProtectedLink, ProtectedLink];
    const fresh = await (await web.signedIn({ javaScript: true, width: 1280 })).newPage();
    fresh.on('pageerror', (e) => errors.push(String(e)));
    fresh.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    await fresh.route(/\/web\/editor\.js$/, (route) => route.abort());
    await fresh.goto(`${web.url}/articles/${other.id}/edit`);
    const element = (id: string) => new RegExp(`<a[^>]*data-service-id="${id}"[^>]*>(.*?)</a>`, 's');
    const copy = element(kept.id).exec(other.body)?.[0];
    expect(copy).toBeDefined();
    await fresh.fill('#body', `${other.body.replace(element(link.id), '$1')}<p>Kept words and ${copy}.</p>`);
    await fresh.unroute(/\/web\/editor\.js$/);
    const [refused] = await Promise.all([
      fresh.waitForResponse((r) => r.request().method() === 'POST'),
      fresh.click('form.editor-form button.primary'),
    ]);
    expect(refused.status()).toBe(422);
    expect(await fresh.textContent('#editor-error')).toContain('added (only the service adds them)');
    await fresh.waitForSelector('.rich-editor-content');
    expect(await fresh.locator('[contenteditable=true] [data-service-protected]').count()).toBe(
      other.protected_links.length - 1,
    );
    const copied = fresh.locator('.rich-editor-content p', { hasText: 'Kept words' }).locator('a');
    expect(await copied.textContent()).toBe(kept.text);
    expect(await copied.getAttribute('data-service-protected')).toBeNull();
    await expectAccessible(fresh, 'the refused save, rich editor');
    await screenshot(fresh, 'rich-editor-refused-save');
    const [repaired] = await Promise.all([
      fresh.waitForResponse((r) => r.request().method() === 'POST'),
      fresh.click('#repair button'),
    ]);
    expect(repaired.status()).toBe(200);
    // Put back in place: the page stays, the repaired body is in the rich editor.
    await fresh.waitForSelector('#save-status:has-text("back as they were")').catch((e) => {
      throw new Error(`${e} ${errors.join(' | ')}`);
    });
    expect(await fresh.locator('#repair').count()).toBe(0);
    expect(await fresh.textContent('#editor-notice')).toContain('back as they were');
    expect(await fresh.locator('[contenteditable=true] [data-service-protected]').count()).toBe(
      other.protected_links.length,
    );
    expect(await fresh.textContent('.rich-editor-content')).toContain(`Kept words and ${kept.text}.`);
    // The link put back reads as it did: the words around it as far apart as they were.
    // (The text without its markup, and without whitespace between blocks, which the editor drops.)
    const words = (text: string): string => text.replace(/\s+/g, ' ');
    const before = words(other.body.replace(/>\s+</g, '><').replace(/<[^>]+>/g, ''));
    const at = before.indexOf(link.text);
    expect(words((await fresh.textContent('.rich-editor-content')) ?? '')).toContain(
      before.slice(Math.max(0, at - 20), at + link.text.length + 20),
    );
    await fresh.keyboard.press('ControlOrMeta+S');
    await fresh.waitForSelector(`#save-status:text-is("Saved as revision ${other.revision + 1}.")`);
    const saved = await article(other.id);
    expect(saved.body).toContain('Kept words and <a');
    expect(new Set(saved.protected_links.map((l) => l.id))).toEqual(
      new Set(other.protected_links.map((l) => l.id)),
    );
  });

  /** Articles of the demo's sites other than the one the tests above edit, each taken once. */
  const spare: (Article & { id: string; title: string })[] = [];
  async function spareArticle(withLinks = false): Promise<Article & { id: string; title: string }> {
    if (spare.length === 0) {
      for (const site of web.demo.sites) {
        const list = (await (await web.api(`/sites/${site.id}/articles?per_page=100`)).json()) as {
          data: { id: string }[];
        };
        for (const { id } of list.data) {
          if (id !== articleId)
            spare.push({ ...(await article(id)), id } as Article & { id: string; title: string });
        }
      }
      // The repair test above takes the last article with more than one protected link: not those.
      spare.reverse();
    }
    const i = spare.findIndex((a) => !withLinks || a.protected_links.length > 0);
    if (i < 0) throw new Error('the seed has too few articles');
    return spare.splice(i, 1)[0] as Article & { id: string; title: string };
  }

  /** A page signed in as the demo account, JavaScript on, at a width and in a colour scheme. */
  async function signedInPage(width: number, colorScheme: 'light' | 'dark' = 'light'): Promise<Page> {
    const ctx = await web.browser.newContext({ viewport: { width, height: 844 }, colorScheme });
    const p = await ctx.newPage();
    p.on('pageerror', (e) => errors.push(String(e)));
    await signIn(p, web.url, web.demo);
    return p;
  }

  /** Edits an article through the API, as another tab or an assistant would. */
  async function editThroughApi(id: string, change: { title?: string; body?: string }): Promise<void> {
    const res = await web.api(`/articles/${id}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(change),
    });
    expect(res.status).toBe(200);
  }

  it('saves in place again and again without a stale refusal; the revisions drawer lists the new revisions', async () => {
    errors.length = 0;
    const a = await spareArticle();
    for (const [width, scheme] of [
      [1280, 'light'],
      [390, 'dark'],
    ] as const) {
      const p = await signedInPage(width, scheme);
      const before = await article(a.id);
      await p.goto(`${web.url}/articles/${a.id}/edit`);
      await p.waitForSelector('.rich-editor-content');
      const loads: string[] = [];
      p.on('framenavigated', (f) => {
        if (f === p.mainFrame()) loads.push(f.url());
      });
      await p.focus('#title');
      await p.keyboard.press('End');
      await p.keyboard.type(` (${width})`);
      await p.keyboard.press('ControlOrMeta+S');
      await savedAs(before.revision + 1, p);
      await p.fill('#reason', 'Second save in place');
      await p.focus('.rich-editor-content');
      await p.keyboard.press('ControlOrMeta+End');
      await p.keyboard.type(` Second save at ${width}.`);
      await p.keyboard.press('ControlOrMeta+S');
      await savedAs(before.revision + 2, p);
      expect(loads).toEqual([]);
      expect(await p.textContent('h1')).toBe(`Edit “${before.title} (${width})”`);
      expect(await p.inputValue('#reason')).toBe('');
      const after = await article(a.id);
      expect(after.revision).toBe(before.revision + 2);
      expect(after.body).toContain(`Second save at ${width}.`);
      await screenshot(p, `rich-editor-saved-in-place-${width}-${scheme}`);

      // The revisions drawer, from the keyboard: the button beside Save opens it, Escape closes it.
      expect(await p.locator('details#revisions').count()).toBe(0);
      await p.focus('#revisions-button');
      await p.keyboard.press('Enter');
      const drawer = p.locator('dialog#revisions-drawer[open]');
      await drawer.waitFor();
      expect(await p.getAttribute('#revisions-button', 'aria-expanded')).toBe('true');
      expect(await p.evaluate('document.activeElement?.id')).toBe('revisions-close');
      const latest = drawer.locator(`#panel-revision-${after.revision}`);
      expect(await latest.textContent()).toContain('Editor');
      expect(await latest.textContent()).toContain('(person)');
      expect(await latest.locator('a', { hasText: 'Compare with current' }).count()).toBe(0);
      const earlier = drawer.locator(`#panel-revision-${before.revision}`);
      expect(await earlier.locator('a').first().getAttribute('href')).toBe(
        `/articles/${a.id}/revisions/${before.revision}`,
      );
      expect(await earlier.locator('a', { hasText: 'Compare with current' }).getAttribute('href')).toBe(
        `/articles/${a.id}/revisions/compare?from=${before.revision}&to=${after.revision}`,
      );
      expect(await earlier.locator('a', { hasText: 'Restore' }).getAttribute('href')).toBe(
        `/articles/${a.id}/revisions/${before.revision}/restore`,
      );
      const box = await drawer.boundingBox();
      if (width === 390) expect(Math.round(box?.width ?? 0)).toBe(390);
      else expect(box?.width ?? 0).toBeLessThan(width / 2);
      expect(await p.$eval('html', (root) => root.scrollWidth)).toBeLessThanOrEqual(width);
      await screenshot(p, `rich-editor-revisions-drawer-${width}-${scheme}`);
      await expectAccessible(p, `the revisions drawer, ${width} ${scheme}`);
      await p.keyboard.press('Escape');
      // The dialog's close event comes after it has closed: then the focus is back on the button.
      await p.waitForSelector('#revisions-button[aria-expanded=false]');
      expect(await p.locator('dialog#revisions-drawer[open]').count()).toBe(0);
      expect(await p.evaluate('document.activeElement?.id')).toBe('revisions-button');
      // Opening a revision from the drawer leaves the editor for its page.
      await p.click('#revisions-button');
      await Promise.all([p.waitForNavigation(), earlier.locator('a').first().click()]);
      expect(new URL(p.url()).pathname).toBe(`/articles/${a.id}/revisions/${before.revision}`);
      await p.context().close();
    }
    expect(errors).toEqual([]);
  });

  it('answers in place when nothing changed, a title is refused, the article changed since (then saves on top), the service is away, the session ended', async () => {
    errors.length = 0;
    const a = await spareArticle();
    const p = await signedInPage(1280);
    await p.goto(`${web.url}/articles/${a.id}/edit`);
    await p.waitForSelector('.rich-editor-content');
    const start = await article(a.id);
    const status = p.locator('#save-status[role=status]');

    // Nothing changed: no revision. (The first save may store the body as the rich editor writes it.)
    await p.click('form.editor-form button.primary');
    await status.filter({ hasText: /^(Saved as revision|Nothing changed)/ }).waitFor();
    const first = (await article(a.id)).revision;
    await p.click('form.editor-form button.primary');
    await status.filter({ hasText: 'Nothing changed' }).waitFor();
    expect(await p.textContent('#editor-notice')).toContain('no new revision was made');
    expect((await article(a.id)).revision).toBe(first);

    // A title of spaces: the application's refusal, 400, the text kept.
    await p.fill('#title', '   ');
    await p.click('form.editor-form button.primary');
    await status.filter({ hasText: 'Not saved' }).waitFor();
    expect(await p.textContent('#editor-error')).toContain('Not saved');
    expect(await p.inputValue('#title')).toBe('   ');
    await p.fill('#title', `${start.title} (mine)`);

    // Changed since: another edit through the API, then Save: 412 in place, what changed shown.
    await editThroughApi(a.id, { title: `${start.title} (theirs)` });
    await p.click('form.editor-form button.primary');
    await status.filter({ hasText: 'changed since you opened it' }).waitFor();
    expect(await p.textContent('#stale-title')).toContain(`${start.title} (theirs)`);
    expect(await p.textContent('form.editor-form button.primary')).toBe(
      `Save on top of revision ${first + 1}`,
    );
    expect(await p.inputValue('input[name=expected_revision]')).toBe(String(first + 1));
    expect(await p.inputValue('#title')).toBe(`${start.title} (mine)`);
    await screenshot(p, 'rich-editor-stale-in-place');
    await expectAccessible(p, 'a stale save, in place');
    await p.click('form.editor-form button.primary');
    await savedAs(first + 2, p);
    expect(await p.textContent('form.editor-form button.primary')).toBe('Save');
    expect(await p.locator('#stale').count()).toBe(0);
    expect((await article(a.id)).title).toBe(`${start.title} (mine)`);

    // The service away (a 503 page): said, the text kept.
    await p.route(/\/edit$/, (route) =>
      route.request().method() === 'POST'
        ? route.fulfill({ status: 503, contentType: 'text/html', body: '<main><h1>Unavailable</h1></main>' })
        : route.continue(),
    );
    await p.fill('#title', `${start.title} (while away)`);
    await p.click('form.editor-form button.primary');
    await status.filter({ hasText: 'briefly unavailable' }).waitFor();
    expect(await p.inputValue('#title')).toBe(`${start.title} (while away)`);
    await p.unroute(/\/edit$/);

    // Signed out (the session ended): said, with a link to sign in; the text stays, and is kept.
    await p.context().clearCookies();
    await p.click('form.editor-form button.primary');
    await status.filter({ hasText: 'your session has ended' }).waitFor();
    expect(await p.getAttribute('#save-status a', 'href')).toBe(
      `/sign-in?return_to=${encodeURIComponent(`/articles/${a.id}/edit`)}`,
    );
    expect(await p.inputValue('#title')).toBe(`${start.title} (while away)`);
    await screenshot(p, 'rich-editor-signed-out-in-place');
    await Promise.all([p.waitForNavigation(), p.click('#save-status a')]);
    expect(new URL(p.url()).pathname).toBe('/sign-in');
    await p.fill('#email', web.demo.email);
    await p.fill('#password', web.demo.password);
    await Promise.all([p.waitForNavigation(), p.press('#password', 'Enter')]);
    expect(new URL(p.url()).pathname).toBe(`/articles/${a.id}/edit`);
    await p.waitForSelector('#draft-offer');
    await p.click('#draft-restore');
    expect(await p.inputValue('#title')).toBe(`${start.title} (while away)`);
    await p.keyboard.press('ControlOrMeta+S');
    await savedAs(first + 3, p);
    expect(await p.evaluate(`localStorage.getItem('content-service.editor-draft.${a.id}')`)).toBeNull();
    await p.context().close();
    expect(errors).toEqual([]);
  });

  it('keeps the unsaved text in the browser and offers it back; a draft begun on an older revision shows what changed since and is saved through the stale refusal', async () => {
    errors.length = 0;
    const a = await spareArticle();
    const key = `content-service.editor-draft.${a.id}`;
    const p = await signedInPage(1280);
    p.on('dialog', (d) => void d.accept());
    await p.goto(`${web.url}/articles/${a.id}/edit`);
    await p.waitForSelector('.rich-editor-content');
    await p.focus('.rich-editor-content');
    await p.keyboard.press('ControlOrMeta+End');
    await p.keyboard.type(' A sentence not yet saved.');
    await p.fill('#reason', 'Drafted');
    await expect
      .poll(async () => JSON.parse((await p.evaluate(`localStorage.getItem('${key}')`)) ?? '{}'), PATIENCE)
      .toMatchObject({ base: a.revision, reason: 'Drafted' });

    // Back in the editor: the draft is offered; Discard forgets it.
    await p.goto(`${web.url}/articles/${a.id}/edit`);
    await p.waitForSelector('#draft-offer');
    expect(await p.locator('#draft-stale').count()).toBe(0);
    expect(await p.textContent('#draft-offer')).toContain(`begun on revision ${a.revision}`);
    expect(await p.textContent('.rich-editor-content')).not.toContain('A sentence not yet saved.');
    await expectAccessible(p, 'the draft offered');
    await screenshot(p, 'rich-editor-draft-offered');
    await p.focus('#draft-discard');
    await p.keyboard.press('Enter');
    expect(await p.locator('#draft-offer').count()).toBe(0);
    expect(await p.evaluate(`localStorage.getItem('${key}')`)).toBeNull();

    // A new draft, then the article changes elsewhere: the offer says so and shows what changed.
    await p.focus('.rich-editor-content');
    await p.keyboard.press('ControlOrMeta+End');
    await p.keyboard.type(' Drafted before theirs.');
    await expect.poll(() => p.evaluate(`localStorage.getItem('${key}')`), PATIENCE).not.toBeNull();
    await editThroughApi(a.id, { title: `${a.title}, changed elsewhere` });
    await p.goto(`${web.url}/articles/${a.id}/edit`);
    await p.waitForSelector('#draft-stale');
    expect(await p.textContent('#draft-stale')).toContain(`now at revision ${a.revision + 1}`);
    await p.waitForSelector('#draft-stale-changes');
    expect(await p.textContent('#draft-stale-changes ins')).toContain('changed elsewhere');
    await expectAccessible(p, 'a draft begun on an older revision');
    await screenshot(p, 'rich-editor-draft-stale');
    await p.focus('#draft-restore');
    await p.keyboard.press('Enter');
    expect(await p.textContent('.rich-editor-content')).toContain('Drafted before theirs.');
    expect(await p.inputValue('input[name=expected_revision]')).toBe(String(a.revision));
    // Saving it is refused as stale, in place, then saved on top.
    await p.keyboard.press('ControlOrMeta+S');
    await p.locator('#save-status', { hasText: 'changed since you opened it' }).waitFor();
    await p.keyboard.press('ControlOrMeta+S');
    await savedAs(a.revision + 2, p);
    expect(await p.evaluate(`localStorage.getItem('${key}')`)).toBeNull();
    expect((await article(a.id)).body).toContain('Drafted before theirs.');
    await p.context().close();
    expect(errors).toEqual([]);
  });

  it('lists what the sanitiser removed, and refuses a removed protected link with the offer to put it back, in place (the HTML form with JavaScript)', async () => {
    errors.length = 0;
    const a = await spareArticle(true);
    // A table: markup the rich editor cannot show, so the body stays in the HTML textarea.
    await editThroughApi(a.id, { body: `${a.body}<table><tr><td>cell</td></tr></table>` });
    const p = await signedInPage(1280);
    await p.goto(`${web.url}/articles/${a.id}/edit`);
    await p.waitForSelector('#rich-editor-note');
    const now = await article(a.id);
    const status = p.locator('#save-status[role=status]');
    await p.fill('#body', `${now.body}<p onclick="alert(1)">Clicked.</p>`);
    await p.click('form.editor-form button.primary');
    await savedAs(now.revision + 1, p);
    expect(await p.textContent('#removed')).toContain('onclick');
    expect(await p.inputValue('#body')).not.toContain('onclick');
    await screenshot(p, 'rich-editor-saved-sanitised-in-place');

    const [link] = now.protected_links as [ProtectedLink];
    const element = new RegExp(`<a[^>]*data-service-id="${link.id}"[^>]*>(.*?)</a>`, 's');
    await p.fill('#body', (await p.inputValue('#body')).replace(element, '$1'));
    await p.click('form.editor-form button.primary');
    await status.filter({ hasText: 'protected links must stay' }).waitFor();
    expect(await p.textContent('#editor-error')).toContain(link.id);
    expect(await p.locator('#protected-links li.refused').count()).toBe(1);
    await expectAccessible(p, 'a save refused for its protected links, in place');
    await p.click('#repair button');
    await status.filter({ hasText: 'back as they were' }).waitFor();
    expect(await p.inputValue('#body')).toContain(`data-service-id="${link.id}"`);
    expect(await p.locator('#protected-links li.refused').count()).toBe(0);
    await p.fill('#title', `${now.title}, links kept`);
    await p.click('form.editor-form button.primary');
    await savedAs(now.revision + 2, p);
    expect((await article(a.id)).protected_links.map((l) => l.id)).toContain(link.id);
    await p.context().close();
    expect(errors).toEqual([]);
  });
});

/** A paste as the browser delivers it: a ClipboardEvent carrying the HTML in its DataTransfer. */
async function paste(page: Page, html: string, text: string): Promise<void> {
  await page.evaluate(`(() => {
    const data = new DataTransfer();
    data.setData('text/html', ${JSON.stringify(html)});
    data.setData('text/plain', ${JSON.stringify(text)});
    const event = new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true });
    document.querySelector('.rich-editor-content').dispatchEvent(event);
  })()`);
}

/** A copy or cut of the editor's selection as the browser delivers it; what the editor put on the clipboard. */
async function clipboard(page: Page, kind: 'copy' | 'cut', type: string): Promise<string> {
  return (await page.evaluate(`(() => {
    const data = new DataTransfer();
    const event = new ClipboardEvent(${JSON.stringify(kind)}, { clipboardData: data, bubbles: true, cancelable: true });
    document.querySelector('.rich-editor-content').dispatchEvent(event);
    return data.getData(${JSON.stringify(type)});
  })()`)) as string;
}
