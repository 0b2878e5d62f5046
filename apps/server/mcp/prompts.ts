import type { GetPromptResult, Prompt, Server } from '@modelcontextprotocol/server';
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { cleanText, parameterError, toolFields } from '../../application/contract.ts';
import { CompareQuery, type RevisionComparisonOut } from '../../application/revisions.ts';
import { StatsQuery } from '../../application/sites.ts';
import { recorded, type Served } from './recorded.ts';
import { articleUri, REPORT_URI, renderReport } from './resources.ts';
import { argumentErrors } from './tool-errors.ts';

/*
 * The MCP prompts: a monthly report of a site, improving an article while keeping its protected links,
 * and reviewing the changes between two revisions. Each fills in what it needs with the use case the
 * matching tool calls (the report, get_article, compare_revisions), is recorded like a tool call
 * (operation `prompt_<name>`), and refuses invalid arguments naming each one, as a tool does.
 */

export const GOAL_MAX = 1000;

const quote = (text: string): string => JSON.stringify(text);

type PromptDefinition = {
  prompt: Prompt;
  /** The arguments, checked as a tool's are. */
  input: z.ZodType;
  get(served: Served, args: unknown): Promise<GetPromptResult>;
};

function userText(description: string, text: string): GetPromptResult {
  return { description, messages: [{ role: 'user', content: { type: 'text', text } }] };
}

const MonthlyReportArgs = z.strictObject({
  site_id: toolFields.siteId,
  period: StatsQuery.shape.period.meta({
    description: 'this_month, last_month, last_30_days or a month YYYY-MM (UTC).',
  }),
});

const monthlyReport: PromptDefinition = {
  prompt: {
    name: 'monthly_report',
    title: 'Monthly report of a site',
    description:
      'Write the report of one website for a period: its articles published and backlinks acquired, ' +
      'compared with the period before.',
    arguments: [
      { name: 'site_id', description: 'The site (list_sites gives the ids).', required: true },
      {
        name: 'period',
        description: 'this_month, last_month, last_30_days or a month YYYY-MM (UTC).',
        required: true,
      },
    ],
  },
  input: MonthlyReportArgs,
  get: (served, raw) => {
    const args = raw as z.output<typeof MonthlyReportArgs>;
    return recorded(served, 'prompt_monthly_report', { siteId: args.site_id }, async ({ call, settle }) => {
      const report = settle(await served.services.application.sites.report(call, args.site_id, args.period));
      const uri = REPORT_URI.replace('{site_id}', encodeURIComponent(report.site.id)).replace(
        '{period}',
        encodeURIComponent(args.period),
      );
      return userText(
        `Monthly report of ${report.site.name} for ${report.stats.period.key}`,
        [
          `Write the report of the website ${report.site.name} (${report.site.url}) for the period ` +
            `${report.stats.period.key}, for the site’s owner.`,
          '',
          renderReport(report),
          '',
          'Say what was done in the period (articles published, backlinks acquired, industry and local), how ' +
            'it compares with the period before and what stands out, in a few short paragraphs. Use only these ' +
            'figures; for the articles and backlinks themselves, call list_articles and list_backlinks with ' +
            `site_id ${report.site.id}, from ${report.stats.period.from} and to ${report.stats.period.to}. ` +
            `The figures per day are in the resource ${uri}.`,
        ].join('\n'),
      );
    });
  },
};

const ImproveArticleArgs = z.strictObject({
  article_id: toolFields.articleId,
  goal: cleanText(z.string().max(GOAL_MAX, `must be at most ${GOAL_MAX} characters`), { lines: true })
    .optional()
    .meta({ description: 'What the improvement should achieve.' }),
});

const improveArticle: PromptDefinition = {
  prompt: {
    name: 'improve_article',
    title: 'Improve an article',
    description:
      'Improve one article’s title and text, keeping its protected links exactly as they are; check the ' +
      'edit with preview_article_edit before saving it with update_article.',
    arguments: [
      { name: 'article_id', description: 'The article (list_articles gives the ids).', required: true },
      {
        name: 'goal',
        description: 'What the improvement should achieve (clearer, shorter, a keyword, ...).',
        required: false,
      },
    ],
  },
  input: ImproveArticleArgs,
  get: (served, raw) => {
    const args = raw as z.output<typeof ImproveArticleArgs>;
    return recorded(
      served,
      'prompt_improve_article',
      { articleId: args.article_id },
      async ({ call, settle }) => {
        const a = settle(await served.services.application.articles.get(call, args.article_id));
        const links =
          a.protected_links.length === 0
            ? ['It has no protected links.']
            : [
                `Its protected links (${a.protected_links.length}), each an element carrying data-service-protected in the body:`,
                ...a.protected_links.map((l) => `- ${l.id} (${l.kind}) ${quote(l.text)} → ${l.href}`),
              ];
        return userText(
          `Improve ${quote(a.title)}`,
          [
            `Improve the article ${quote(a.title)} (article_id ${a.id}, revision ${a.revision}, ${a.status}, ` +
              `${a.word_count} words${a.target_keyword ? `, target keyword ${quote(a.target_keyword)}` : ''}; ${a.url}).`,
            `Goal: ${args.goal ?? 'make it clearer and more useful to its readers, in the same voice.'}`,
            '',
            ...links,
            'RULE: keep every element carrying data-service-protected exactly as it is in the body below: the same ' +
              'tag, attributes, href and text. Copy each one verbatim; you may move it and change everything ' +
              'around it, but never remove, reword or add one. An edit that does is refused and changes nothing.',
            '',
            'To save: first call preview_article_edit with article_id, your new title and/or body and ' +
              `expected_revision ${a.revision}; it changes nothing and says whether the edit would be saved. When it ` +
              'says it would be saved, call update_article with the same arguments and a short reason. If it would ' +
              'be refused, put the protected elements back as they were and preview again.',
            '',
            `The article’s body (HTML), also the resource ${articleUri(a.id)}:`,
            a.body,
          ].join('\n'),
        );
      },
    );
  },
};

const ReviewChangesArgs = z.strictObject({
  article_id: toolFields.articleId,
  from: CompareQuery.shape.from,
  to: CompareQuery.shape.to,
});

/** A word diff in words: deleted text in [-…-], inserted text in {+…+}. */
function markedDiff(c: RevisionComparisonOut): string {
  return c.changes
    .map((change) =>
      change.op === 'equal'
        ? change.text
        : change.op === 'insert'
          ? `{+${change.text}+}`
          : `[-${change.text}-]`,
    )
    .join('');
}

const reviewChanges: PromptDefinition = {
  prompt: {
    name: 'review_changes',
    title: 'Review the changes between two revisions',
    description:
      'Review what changed in one article from one revision to another (list_revisions gives them).',
    arguments: [
      { name: 'article_id', description: 'The article (list_articles gives the ids).', required: true },
      { name: 'from', description: 'The revision before (a number from 1).', required: true },
      { name: 'to', description: 'The revision after (a number from 1).', required: true },
    ],
  },
  input: ReviewChangesArgs,
  get: (served, raw) => {
    const args = raw as z.output<typeof ReviewChangesArgs>;
    return recorded(
      served,
      'prompt_review_changes',
      { articleId: args.article_id },
      async ({ call, settle }) => {
        const c = settle(
          await served.services.application.revisions.compare(call, args.article_id, {
            from: args.from,
            to: args.to,
          }),
        );
        const title =
          c.title.before === c.title.after
            ? `The title is the same: ${quote(c.title.after)}.`
            : `The title changed from ${quote(c.title.before)} to ${quote(c.title.after)}.`;
        return userText(
          `Changes to article ${c.article_id} from revision ${c.from} to ${c.to}`,
          [
            `Review the changes to article ${c.article_id} from revision ${c.from} to revision ${c.to}: say what ` +
              'changed, whether it reads better, and anything that looks wrong (facts, tone, broken sentences, ' +
              'links). list_revisions says who made each revision and why.',
            '',
            title,
            `The text${c.granularity === 'line' ? ', compared line by line' : ''}, deleted words in [-…-] and ` +
              'inserted words in {+…+}:',
            markedDiff(c),
          ].join('\n'),
        );
      },
    );
  },
};

export const PROMPTS: readonly PromptDefinition[] = [monthlyReport, improveArticle, reviewChanges];

/** prompts/list and prompts/get on a request's server. */
export function registerPrompts(server: Server, served: Served): void {
  const byName = new Map(PROMPTS.map((p) => [p.prompt.name, p]));
  server.setRequestHandler('prompts/list', async () => ({ prompts: PROMPTS.map((p) => p.prompt) }));
  server.setRequestHandler('prompts/get', async (request): Promise<GetPromptResult> => {
    const { name, arguments: args } = request.params;
    const definition = byName.get(name);
    if (!definition) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown prompt: ${name}`);
    const parsed = definition.input.safeParse(args ?? {});
    if (!parsed.success) {
      return recorded(served, `prompt_${name}`, {}, async () => {
        throw parameterError(`The arguments of ${name} are invalid`, argumentErrors(parsed.error.issues));
      });
    }
    return definition.get(served, parsed.data);
  });
}
