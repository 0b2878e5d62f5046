import { AnchorType, type BacklinkCategory } from '../../domain/backlink/events.ts';

/* Realistic-looking demo content: bodies of real HTML with protected backlink anchors and internal links. */

const TRADES = [
  { name: 'Northside Plumbing', domain: 'northside-plumbing.example', topic: 'plumbing' },
  { name: 'Harbour Dental', domain: 'harbour-dental.example', topic: 'dental care' },
  { name: 'Greenleaf Landscaping', domain: 'greenleaf-gardens.example', topic: 'garden design' },
  { name: 'Brightspark Electrical', domain: 'brightspark-electric.example', topic: 'home wiring' },
  { name: 'Oak & Iron Joinery', domain: 'oak-iron-joinery.example', topic: 'bespoke furniture' },
] as const;

const SUBJECTS = [
  'How to choose',
  'A beginner’s guide to',
  'Seven mistakes to avoid with',
  'What to expect from',
  'The real cost of',
  'Seasonal checklist for',
  'Questions to ask about',
  'Why we recommend regular',
];
const SENTENCES = [
  'Most homeowners only think about it when something goes wrong, which is usually the most expensive moment.',
  'A short inspection once a year catches the small problems before they become large ones.',
  'Prices vary by region, but the biggest difference comes from the quality of the materials.',
  'We asked our team which questions customers ask most often, and collected the answers here.',
  'If you are unsure, a qualified professional can give you a written quote within a day or two.',
  'Local regulations change from time to time, so check what applies where you live.',
  'The right choice depends on how you use the space and how long you plan to stay.',
  'Done well, the work pays for itself within a few years through lower running costs.',
];
const PARTNERS = [
  'https://www.trade-association.example/members',
  'https://citylocalnews.example/business/directory',
  'https://homeadvice-weekly.example/guides',
  'https://regional-chamber.example/listing',
];

export type DemoRandom = () => number;

/** A small seeded PRNG (mulberry32) so `seed-demo` data looks varied but tests can fix it. */
export function seededRandom(seed: number): DemoRandom {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pick = <T>(rnd: DemoRandom, list: readonly T[]): T => list[Math.floor(rnd() * list.length)] as T;

export function demoSite(index: number): { name: string; domain: string; topic: string } {
  const trade = TRADES[index % TRADES.length] as (typeof TRADES)[number];
  const suffix = index < TRADES.length ? '' : `-${Math.floor(index / TRADES.length) + 1}`;
  return {
    name: trade.name,
    domain: trade.domain.replace('.example', `${suffix}.example`),
    topic: trade.topic,
  };
}

function slugify(text: string): string {
  return text
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

type DemoArticle = {
  title: string;
  body: string;
  url: string;
  targetKeyword: string;
};

/** An article body: a lead, a few sections, one internal link and one or two backlink anchors, all protected. */
export function demoArticle(
  rnd: DemoRandom,
  site: { domain: string; topic: string },
  n: number,
): DemoArticle {
  const title = `${pick(rnd, SUBJECTS)} ${site.topic}${n > 0 ? ` (part ${n + 1})` : ''}`;
  const slug = `${slugify(title)}-${n + 1}`;
  const url = `https://${site.domain}/blog/${slug}`;
  const paragraph = (): string => {
    const count = 2 + Math.floor(rnd() * 3);
    return Array.from({ length: count }, () => pick(rnd, SENTENCES)).join(' ');
  };
  const internal = `<a href="https://${site.domain}/services" data-service-protected="internal" data-service-id="il_${n + 1}">our ${site.topic} services</a>`;
  const partner = pick(rnd, PARTNERS);
  const backlink = `<a href="${partner}" rel="noopener" data-service-protected="backlink" data-service-id="bl_${n + 1}">${site.topic} advice</a>`;
  const body = [
    `<p>${paragraph()}</p>`,
    `<h2>What matters most</h2>`,
    `<p>${paragraph()} Read more about ${internal}.</p>`,
    `<ul><li>${pick(rnd, SENTENCES)}</li><li>${pick(rnd, SENTENCES)}</li><li>${pick(rnd, SENTENCES)}</li></ul>`,
    `<h2>Further reading</h2>`,
    `<p>${paragraph()} Independent ${backlink} is worth a look.</p>`,
    `<blockquote><p>${pick(rnd, SENTENCES)}</p></blockquote>`,
  ].join('\n');
  return { title, body, url, targetKeyword: site.topic };
}

const SOURCES = [
  { domain: 'trade-association.example', category: 'industry' },
  { domain: 'homeadvice-weekly.example', category: 'industry' },
  { domain: 'builders-forum.example', category: 'industry' },
  { domain: 'citylocalnews.example', category: 'local' },
  { domain: 'regional-chamber.example', category: 'local' },
  { domain: 'townhall-events.example', category: 'local' },
] as const;

export function demoBacklink(
  rnd: DemoRandom,
  site: { name: string; domain: string; topic: string },
): {
  sourceDomain: string;
  sourceUrl: string;
  targetUrl: string;
  anchorText: string;
  anchorType: AnchorType;
  category: BacklinkCategory;
} {
  const source = pick(rnd, SOURCES);
  const anchorType = pick(rnd, AnchorType.options);
  const anchorText =
    anchorType === 'branded'
      ? site.name
      : anchorType === 'naked_url'
        ? `https://${site.domain}/`
        : anchorType === 'generic'
          ? 'click here'
          : anchorType === 'image'
            ? ''
            : anchorType === 'exact'
              ? site.topic
              : `best ${site.topic} tips`;
  return {
    sourceDomain: source.domain,
    sourceUrl: `https://${source.domain}/${Math.floor(rnd() * 1e6).toString(36)}`,
    targetUrl: `https://${site.domain}/`,
    anchorText,
    anchorType,
    category: source.category,
  };
}
