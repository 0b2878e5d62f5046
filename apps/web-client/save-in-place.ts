/*
 * Saving without leaving the editor, as Ghost and Gutenberg do: Save (its button or Ctrl/Cmd+S) and
 * "Put the protected links back" send the form's own fields with fetch, plus `in_place=1`, to the
 * form's own address; the server checks it as it checks every form (the sender before the body, then
 * the CSRF token) and runs the same edit. It answers with the editor page, as it answers the form
 * without JavaScript, a save included ("Saved as revision N" instead of the redirect to the article):
 * this script takes from that answer what changed (the messages above the form, the revision shown,
 * the expected revision and the Save button's words, the offer to put the protected links back, the
 * protected links, the revisions panel, and the body when the server changed it) and says the outcome
 * in a line under the buttons, a live region. An answer that is not the editor (signed out, the 503
 * page, a form refused before its fields were read) is said there too; the text stays in the form.
 * "Check changes" still opens its page.
 */

export type InPlaceHooks = {
  /** Puts a body in the editor; `source`, when given, is the markup whose protected links are the blocks. */
  setBody: (html: string, source: string | null) => void;
  /** The protected links are those of this markup now (a refused save's answer). */
  setProtectedSource: (html: string) => void;
  /** The form's text is the article's now (saved, or nothing changed): nothing left unsaved. */
  saved: () => void;
  /** The page may be left without asking (the person follows the sign-in link). */
  release: () => void;
};

/** A line under the form's buttons that says what became of a save: visible, and read out (`role=status`). */
function statusLine(
  form: HTMLFormElement,
  leaving: () => void,
): {
  say: (text: string, opts?: { failed?: boolean; link?: { href: string; text: string } }) => void;
} {
  const line = document.createElement('p');
  line.id = 'save-status';
  line.className = 'save-status';
  line.setAttribute('role', 'status');
  form.querySelector('.actions')?.after(line);
  return {
    say(text, opts = {}) {
      line.classList.toggle('failed', opts.failed ?? false);
      // Emptied first, so that the same words said twice are read twice.
      line.replaceChildren();
      requestAnimationFrame(() => {
        line.append(text);
        if (opts.link) {
          const a = document.createElement('a');
          a.href = opts.link.href;
          a.textContent = opts.link.text;
          line.append(' ', a);
          if (opts.link.href.startsWith('/sign-in')) a.addEventListener('click', leaving);
        }
      });
    },
  };
}

/**
 * The form's own address (`/articles/{id}/edit`). Not `form.action`: the form has a button named
 * `action` (Put the protected links back), which that property gives instead.
 */
export function formPath(form: HTMLFormElement): string {
  return new URL(form.getAttribute('action') ?? '', location.href).pathname;
}

/** Text as one line: whitespace collapsed. */
const oneLine = (text: string | null | undefined): string => (text ?? '').replace(/\s+/g, ' ').trim();

/** Replaces `selector`'s element on this page with the answer's (or removes it when the answer has none). */
function take(answer: Document, selector: string): Element | null {
  const ours = document.querySelector(selector);
  const theirs = answer.querySelector(selector);
  if (!ours || !theirs) return null;
  const node = document.importNode(theirs, true);
  ours.replaceWith(node);
  return node;
}

export function saveInPlace(form: HTMLFormElement, hooks: InPlaceHooks): void {
  const status = statusLine(form, hooks.release);
  let busy = false;
  const editPath = formPath(form);

  form.addEventListener('submit', (event) => {
    const submitter = event.submitter as HTMLButtonElement | null;
    // Check changes has its own page (its formaction).
    if (submitter?.hasAttribute('formaction')) return;
    event.preventDefault();
    if (busy) return;
    busy = true;
    form.setAttribute('aria-busy', 'true');
    void send(submitter).finally(() => {
      busy = false;
      form.removeAttribute('aria-busy');
    });
  });

  async function send(submitter: HTMLButtonElement | null): Promise<void> {
    const fields = new URLSearchParams();
    for (const [name, value] of new FormData(form, submitter)) {
      if (typeof value === 'string') fields.append(name, value);
    }
    fields.set('in_place', '1');
    let response: Response;
    try {
      response = await fetch(editPath, {
        method: 'POST',
        body: fields,
        credentials: 'same-origin',
        // Without a session the form is sent to sign-in: that redirect is the answer, not its page.
        redirect: 'manual',
        headers: { accept: 'text/html' },
      });
    } catch {
      status.say(
        'Not saved: the service could not be reached. Your text is kept here and in this browser; save again once the connection is back.',
        { failed: true },
      );
      return;
    }
    if (response.type === 'opaqueredirect' || (response.status >= 300 && response.status < 400)) {
      status.say(
        'Not saved: your session has ended. Your text is kept here and in this browser: sign in again and you will come back to this editor, which offers it to you.',
        {
          failed: true,
          link: { href: `/sign-in?return_to=${encodeURIComponent(editPath)}`, text: 'Sign in again' },
        },
      );
      return;
    }
    const answer = new DOMParser().parseFromString(await response.text(), 'text/html');
    if (!answer.querySelector('#editor-form')) {
      refused(response.status, answer);
      return;
    }
    apply(answer);
  }

  /** An answer that is not the editor: said in the status line, the text left as it is. */
  function refused(code: number, answer: Document): void {
    if (code === 503) {
      status.say(
        'Not saved: the service is briefly unavailable (nothing is wrong with what you did). The save was made in full or not at all: save again in a few seconds, and the editor will tell you which. Your text is kept.',
        { failed: true },
      );
      return;
    }
    const main = answer.querySelector('main');
    const heading = oneLine(main?.querySelector('h1')?.textContent);
    const first = oneLine(main?.querySelector('[role=alert], p')?.textContent);
    const why = [heading, first].filter((t) => t !== '').join(': ');
    status.say(`Not saved (${code})${why ? `: ${why}` : ''}. Your text is kept.`, { failed: true });
  }

  /** The editor's answer: its parts that changed, taken into this page. */
  function apply(answer: Document): void {
    const messages = take(answer, '#editor-messages');
    const outcome = messages?.getAttribute('data-outcome') ?? '';
    // The line under the buttons reads the outcome out; the messages above are to be seen.
    for (const live of messages?.querySelectorAll('[role=status], [role=alert]') ?? []) {
      live.removeAttribute('role');
    }
    take(answer, '#editor-revision');
    const heading = answer.querySelector('main h1');
    const ourHeading = document.querySelector('main h1');
    if (heading && ourHeading) ourHeading.textContent = heading.textContent;
    document.title = answer.title;
    const field = (name: string) => form.elements.namedItem(name) as HTMLInputElement | null;
    const theirField = (name: string) =>
      answer.querySelector<HTMLInputElement>(`#editor-form [name="${name}"]:not([type=submit])`);
    const expected = field('expected_revision');
    if (expected) expected.value = theirField('expected_revision')?.value ?? expected.value;
    const save = form.querySelector('.actions button.primary');
    const theirSave = answer.querySelector('#editor-form .actions button.primary');
    if (save && theirSave) save.textContent = theirSave.textContent;
    // The offer to put the protected links back, when the answer makes it.
    const repair = answer.querySelector('#repair');
    const ourRepair = form.querySelector('#repair');
    if (repair) {
      const node = document.importNode(repair, true);
      if (ourRepair) ourRepair.replaceWith(node);
      else expected?.before(node);
    } else {
      ourRepair?.remove();
    }
    take(answer, 'aside.protected-links');
    take(answer, '#revisions-list');
    const source = answer.querySelector<HTMLTemplateElement>('template#protected-source');
    const body = answer.querySelector<HTMLTextAreaElement>('#editor-form textarea#body')?.value ?? null;
    if (outcome === 'repaired' && body !== null) {
      hooks.setBody(body, body);
    } else if (outcome === 'saved' && body !== null && answer.querySelector('#removed')) {
      // What the server stored, without what it removed.
      hooks.setBody(body, body);
    } else if (source) {
      hooks.setProtectedSource(source.innerHTML);
    }
    if (outcome === 'saved') {
      const title = field('title');
      const stored = theirField('title')?.value;
      if (title && stored !== undefined) title.value = stored;
      const reason = field('reason');
      if (reason) reason.value = '';
    }
    if (outcome === 'saved' || outcome === 'unchanged') hooks.saved();
    const notice = oneLine(
      (
        answer.querySelector('#editor-notice p') ??
        answer.querySelector('#editor-error p') ??
        answer.querySelector('#editor-error')
      )?.textContent,
    );
    const shown = outcome === 'stale' ? `${notice} What changed since is shown above the form.` : notice;
    status.say(shown, {
      failed: outcome === 'refused' || outcome === 'stale',
      ...(outcome === 'saved' || outcome === 'unchanged' || outcome === 'repaired'
        ? {}
        : { link: { href: '#editor-messages', text: 'Show the details' } }),
    });
  }
}
