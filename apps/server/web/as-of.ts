import type { ArticleAsOfOut } from '../../application/articles.ts';
import { asOfParam } from '../../application/contract.ts';
import { type Html, html } from '../http/html.ts';
import { linkTo } from './sites.ts';

/*
 * "View as of…": an article as it stood at an instant, on the account holder's article pages
 * (`/articles/{id}/as-of`) and the support staff's (`/staff/articles/{id}/as-of`). Both pages read the
 * instant from the same GET form (a date and a time, UTC), call the application's `getAsOf` (the API's
 * `GET /api/v1/articles/{id}?as_of=`; staff through `support.articleAsOf`), and render its answer here.
 */

/** What the form sent, as typed (kept in the form when it is answered with an error). */
export type AsOfFields = { date: string; time: string };

/** The form's fields read: nothing asked yet, an instant, or what is wrong with them. */
export type AsOfAsked =
  | { kind: 'none'; fields: AsOfFields }
  | { kind: 'instant'; fields: AsOfFields; instant: string }
  | { kind: 'refused'; fields: AsOfFields; field: 'date' | 'time'; message: string };

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const TIME = /^([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?$/;

/** A query value as text: '' when absent, null when given more than once or not as text. */
function single(value: unknown): string | null {
  if (value === undefined) return '';
  return typeof value === 'string' ? value.trim() : null;
}

/**
 * The instant a form asked for (`date` YYYY-MM-DD and `time` HH:MM or HH:MM:SS, in UTC), checked as
 * the API checks `as_of` (`asOfParam`); a date that is no day of the calendar, a time that is no time
 * of day, or either missing, is refused in words. Whether it is in the future is the use case's to say.
 * Pure.
 */
export function readAsOf(query: unknown): AsOfAsked {
  const q = (query ?? {}) as Record<string, unknown>;
  const date = single(q.date);
  const time = single(q.time);
  const fields = { date: date ?? '', time: time ?? '' };
  const refused = (field: 'date' | 'time', message: string): AsOfAsked => ({
    kind: 'refused',
    fields,
    field,
    message,
  });
  if (date === null) return refused('date', 'Give the date once.');
  if (time === null) return refused('time', 'Give the time once.');
  if (date === '' && time === '') return { kind: 'none', fields };
  if (date === '') return refused('date', 'Enter a date as well as the time.');
  const day = DATE.exec(date);
  const calendar = day ? new Date(`${date}T00:00:00Z`) : null;
  if (!calendar || Number.isNaN(calendar.getTime()) || calendar.toISOString().slice(0, 10) !== date) {
    return refused('date', `“${date}” is not a date. Enter one as YYYY-MM-DD, such as 2026-11-01.`);
  }
  if (time === '') return refused('time', 'Enter a time as well as the date (UTC, such as 09:30).');
  const clock = TIME.exec(time);
  if (!clock) {
    return refused('time', `“${time}” is not a time of day. Enter one as HH:MM in UTC, such as 09:30.`);
  }
  const instant = `${date}T${clock[1]}:${clock[2]}:${clock[3] ?? '00'}Z`;
  // The API's own rule for `as_of`, so that the page and the API take the same instants.
  if (!asOfParam.safeParse(instant).success) {
    return refused('date', `${date} ${time} is not an instant that can be read. Enter another date.`);
  }
  return { kind: 'instant', fields, instant };
}

const dayFormat = new Intl.DateTimeFormat('en-GB', {
  day: 'numeric',
  month: 'long',
  year: 'numeric',
  timeZone: 'UTC',
});

/** `5 March 2026, 12:00 UTC` (seconds when not :00), in a <time> element. Pure. */
export function instantText(iso: string): Html {
  const at = new Date(iso);
  const clock = at.toISOString().slice(11, 19);
  const shown = clock.endsWith(':00') ? clock.slice(0, 5) : clock;
  return html`<time datetime="${iso}">${dayFormat.format(at)}, ${shown} UTC</time>`;
}

/**
 * The form: a date and a time (native `type=date` and `type=time`, labelled, UTC said in the labels
 * and the hint), a GET to `action`, so it works without JavaScript and from the keyboard. A refused
 * field is marked `aria-invalid` and named by the message beside it; the values typed stay.
 */
export function asOfForm(
  action: string,
  asked: AsOfAsked,
  opts: { invalid?: 'date' | 'time' | null } = {},
): Html {
  const { fields } = asked;
  const refusedField = asked.kind === 'refused' ? asked.field : (opts.invalid ?? null);
  const invalid = (field: 'date' | 'time'): Html =>
    refusedField === field
      ? html` aria-invalid="true" aria-describedby="as-of-hint as-of-error"`
      : html` aria-describedby="as-of-hint"`;
  return html`<form class="as-of-form" method="get" action="${action}" id="as-of-form">
<p class="muted" id="as-of-hint">The article as it stood at an instant: a date and a time in UTC (Coordinated Universal Time), to the second.</p>
<div class="as-of-fields">
<div class="field"><label for="as-of-date">Date (UTC)</label><input type="date" id="as-of-date" name="date" value="${fields.date}" required${invalid('date')}></div>
<div class="field"><label for="as-of-time">Time (UTC)</label><input type="time" id="as-of-time" name="time" value="${fields.time}" step="1" required${invalid('time')}></div>
<button type="submit">View as of this time</button>
</div>
</form>`;
}

/** The refusal of the form's fields, beside the form. */
export function asOfRefusal(message: string): Html {
  return html`<div class="error" role="alert" id="as-of-error"><p>${message}</p></div>`;
}

/** The article did not exist yet at the instant asked for: when it did begin, when known. */
export function notYet(instant: string, created: string | null): Html {
  return html`<div class="error" role="alert" id="as-of-error"><p>This article did not exist yet at ${instantText(instant)}.${
    created ? html` It was created on ${instantText(created)}.` : ''
  }</p></div>`;
}

/** The instant is in the future: nothing is known of it yet. */
export function inFuture(instant: string, now: Date): Html {
  return html`<div class="error" role="alert" id="as-of-error"><p>${instantText(instant)} is in the future: an article can only be shown as it stood up to now (${instantText(
    `${now.toISOString().slice(0, 19)}Z`,
  )}). Choose an earlier date or time.</p></div>`;
}

const STATUSES: Record<ArticleAsOfOut['status'], string> = {
  draft: 'Draft',
  scheduled: 'Scheduled',
  published: 'Published',
  archived: 'Archived',
};

/**
 * The article as it stood: "As it stood at <instant> — revision N" (linking to that revision's page),
 * then its title, status and publication date, URL, word count, featured image and body as of then.
 * `images`: the featured image is shown (the account holder's page); otherwise its address and alt text
 * are named (the staff's pages load nothing from an account's image hosts). `current`: the revision the
 * article is at now, with links back to it and to the comparison when it differs.
 */
export function asOfView(
  a: ArticleAsOfOut,
  opts: {
    revisionHref: (n: number) => string;
    currentHref: string;
    compareHref: ((from: number, to: number) => string) | null;
    current: number;
    images: boolean;
    body: (stored: string) => Html;
  },
): Html {
  const { current } = opts;
  const image = a.featured_image;
  const publication = a.published_at
    ? html` <span class="muted">${a.status === 'scheduled' ? 'for' : 'on'} ${instantText(a.published_at)}</span>`
    : '';
  const imageHtml = !image
    ? html`<p class="muted">No featured image then.</p>`
    : opts.images
      ? html`<figure class="featured"><img src="${image.url}" alt="${image.alt}"${
          image.width && image.height ? html` width="${image.width}" height="${image.height}"` : ''
        }><figcaption class="muted">${image.alt || 'No alt text.'}</figcaption></figure>`
      : html`<p>Featured image then: <code>${image.url}</code> <span class="muted">(alt text: ${image.alt || 'none'})</span></p>`;
  const now =
    a.revision === current
      ? html`This is still the current revision.`
      : html`The article is now at revision ${current}: <a href="${opts.currentHref}">the current version</a>${
          opts.compareHref
            ? html` · <a href="${opts.compareHref(a.revision, current)}">changes from revision ${a.revision} to now</a>`
            : ''
        }.`;
  return html`<p class="notice as-of-stated" role="status" id="as-of-stated">As it stood at ${instantText(a.as_of)} — <a href="${opts.revisionHref(a.revision)}">revision ${a.revision}</a>. <span class="as-of-now">${now}</span></p>
<h2 class="as-of-title" id="as-of-title">${a.title}</h2>
<div class="article-head">
<dl class="facts" id="as-of-facts">
<dt>Status then</dt><dd><span class="tag">${STATUSES[a.status]}</span>${publication}</dd>
<dt>URL then</dt><dd>${linkTo(a.url, a.url)}</dd>
<dt>Word count</dt><dd>${a.word_count}</dd>
<dt>Revision</dt><dd>${a.revision} <span class="muted">(made ${instantText(a.updated_at)})</span></dd>
</dl>
${imageHtml}
</div>
<h3 id="as-of-text">Text then</h3>
${opts.body(a.body)}`;
}
