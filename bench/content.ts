import { type DemoRandom, demoArticle, demoBacklink } from '../apps/cli/demo-content.ts';

/*
 * Benchmark content: article bodies of realistic HTML between 2 and 5 KB (the demo generator's
 * article, grown with more sections), one long article of about 20 KB with 10 protected blocks,
 * and backlinks as the demo generator makes them.
 */

const HEADINGS = [
  'Before you start',
  'What it costs',
  'Common questions',
  'How long it takes',
  'What we see most often',
  'A checklist',
  'When to call a professional',
  'Looking after it',
];
const SENTENCES = [
  'Ask for a written quote that lists the materials, the labour and what happens if the job takes longer.',
  'A good tradesperson explains the options instead of selling the most expensive one.',
  'Keep the receipts and the warranty documents together; you will need them when you sell.',
  'Small leaks and loose fittings rarely fix themselves, and they get more expensive every month.',
  'In older houses, expect a surprise or two once the walls are open, and budget ten percent for it.',
  'Check that the installer is registered with the relevant trade body, and ask to see the card.',
  'Most of the work can be done in a day, but curing, drying and inspections add time.',
  'Winter is the busiest season, so book routine work in spring or early autumn.',
  'Cheaper parts often cost more over ten years, because they wear out twice as fast.',
  'We always leave the site as tidy as we found it, and so should anyone you hire.',
];

const pick = <T>(rnd: DemoRandom, list: readonly T[]): T => list[Math.floor(rnd() * list.length)] as T;

function paragraph(rnd: DemoRandom): string {
  const count = 3 + Math.floor(rnd() * 4);
  return Array.from({ length: count }, () => pick(rnd, SENTENCES)).join(' ');
}

function section(rnd: DemoRandom): string {
  const parts = [`<h2>${pick(rnd, HEADINGS)}</h2>`, `<p>${paragraph(rnd)}</p>`];
  if (rnd() < 0.4) {
    parts.push(`<ul><li>${pick(rnd, SENTENCES)}</li><li>${pick(rnd, SENTENCES)}</li></ul>`);
  } else {
    parts.push(`<p>${paragraph(rnd)}</p>`);
  }
  return parts.join('\n');
}

export type Site = { name: string; domain: string; topic: string };

/** The demo article (two protected links) grown with sections to a size drawn between 2 and 5 KB. */
export function benchArticle(
  rnd: DemoRandom,
  site: Site,
  n: number,
): { title: string; body: string; url: string; targetKeyword: string } {
  const article = demoArticle(rnd, site, n);
  const target = 2048 + Math.floor(rnd() * 3 * 1024);
  let body = article.body;
  while (body.length < target - 300) body += `\n${section(rnd)}`;
  return { ...article, body };
}

/** About `bytes` of HTML with `blocks` protected blocks (internal links and backlink anchors, alternating). */
export function longArticleBody(rnd: DemoRandom, site: Site, bytes: number, blocks: number): string {
  const sections: string[] = [];
  let size = 0;
  while (size < bytes) {
    const s = section(rnd);
    sections.push(s);
    size += s.length + 1;
  }
  // Spread the protected blocks evenly, each at the end of a paragraph of its own section.
  for (let b = 0; b < blocks; b++) {
    const at = Math.floor(((b + 0.5) * sections.length) / blocks);
    const link =
      b % 2 === 0
        ? `<a href="https://${site.domain}/services/${b + 1}" data-service-protected="internal" data-service-id="il_long_${b + 1}">our ${site.topic} service ${b + 1}</a>`
        : `<a href="https://partner-${b + 1}.example/guide" rel="noopener" data-service-protected="backlink" data-service-id="bl_long_${b + 1}">${site.topic} guide ${b + 1}</a>`;
    sections[at] = `${sections[at]}\n<p>See ${link} for more.</p>`;
  }
  return sections.join('\n');
}

export { demoBacklink };
