import { type Html, html } from '../http/html.ts';

/*
 * Bar charts as SVG rendered on the server (no script): one bar per day, stacked when there are several
 * series. Readable without seeing it: a <title> and a <desc> that sums it up, axis labels, and each bar
 * with its own <title>; a chart with nothing in it says so. Colours and text sizes come from classes of
 * the shared stylesheet (the CSP allows no inline style): the chart fits the width it is given, and on
 * a narrow screen the stylesheet sets its labels larger in the chart's own units, so they stay readable.
 */

export type ChartSeries = {
  /** What one and several units are called in the description (`article`, `articles`). */
  label: readonly [one: string, other: string];
  /** The stylesheet class of its bars. */
  className: string;
  /** One value per day, in the order of the chart's days. */
  values: readonly number[];
};

export type BarChart = {
  /** Unique on the page: the ids of the title and description derive from it. */
  id: string;
  title: string;
  /** YYYY-MM-DD, one per bar. */
  days: readonly string[];
  series: readonly ChartSeries[];
  /** What the y axis counts (`Articles`). */
  yLabel: string;
  /** What the chart says when it has nothing in it (`No article was published in this period.`). */
  nothing: string;
};

const WIDTH = 640;
const HEIGHT = 260;
const LEFT = 44;
/** Room for the last day's label, centred on its bar, at the larger text of a narrow screen. */
const RIGHT = 24;
const TOP = 12;
const BOTTOM = 44;

const dayFormat = new Intl.DateTimeFormat('en-GB', { day: 'numeric', month: 'short', timeZone: 'UTC' });
const dateFormat = new Intl.DateTimeFormat('en-GB', {
  day: 'numeric',
  month: 'short',
  year: 'numeric',
  timeZone: 'UTC',
});

/** `1 article`, `2 articles`, `0 articles`. */
export function count(n: number, [one, other]: readonly [string, string]): string {
  return `${n} ${n === 1 ? one : other}`;
}

/** `3 Nov 2026` for `2026-11-03`. */
export function longDate(day: string): string {
  return dateFormat.format(new Date(`${day}T00:00:00Z`));
}

function shortDate(day: string): string {
  return dayFormat.format(new Date(`${day}T00:00:00Z`));
}

/**
 * The top of the y axis and its step: whole numbers, at most 5 steps, the step 1, 2 or 5 times a power
 * of ten. An empty chart still has an axis of 0 to 1.
 */
export function yScale(max: number): { top: number; step: number } {
  if (max <= 0) return { top: 1, step: 1 };
  let step = 1;
  for (let power = 1; ; power *= 10) {
    const found = [1, 2, 5].map((m) => m * power).find((s) => Math.ceil(max / s) <= 5);
    if (found !== undefined) {
      step = found;
      break;
    }
  }
  return { top: Math.ceil(max / step) * step, step };
}

/** Which days get a label on the x axis: the first, then every 7th (every day for a week or less). */
export function labelledDays(count: number): number[] {
  const every = count <= 7 ? 1 : 7;
  const out: number[] = [];
  for (let i = 0; i < count; i += every) out.push(i);
  return out;
}

/** The chart's description: the total of each series and the busiest day. */
export function describeChart(chart: BarChart): string {
  const { days, series } = chart;
  if (days.length === 0) return 'No days.';
  const first = days[0] as string;
  const last = days[days.length - 1] as string;
  const perDay = days.map((_, i) => series.reduce((sum, s) => sum + (s.values[i] ?? 0), 0));
  const most = Math.max(0, ...perDay);
  if (most === 0) return `From ${longDate(first)} to ${longDate(last)}. ${chart.nothing}`;
  const totals = series.map((s) =>
    count(
      s.values.reduce((a, b) => a + b, 0),
      s.label,
    ),
  );
  const busiest = perDay.indexOf(most);
  return `From ${longDate(first)} to ${longDate(last)}: ${totals.join(' and ')}; the most on ${longDate(days[busiest] as string)} (${most}).`;
}

/** A bar chart of one or more stacked series per day, as inline SVG. */
export function barChart(chart: BarChart): Html {
  const { days, series } = chart;
  const perDay = days.map((_, i) => series.reduce((sum, s) => sum + (s.values[i] ?? 0), 0));
  const { top, step } = yScale(Math.max(0, ...perDay));
  const plotWidth = WIDTH - LEFT - RIGHT;
  const plotHeight = HEIGHT - TOP - BOTTOM;
  const slot = plotWidth / Math.max(1, days.length);
  const barWidth = Math.max(1, slot * 0.72);
  const y = (value: number): number => TOP + plotHeight - (value / top) * plotHeight;
  const n = (value: number): string => String(Math.round(value * 10) / 10);

  const grid: Html[] = [];
  for (let v = 0; v <= top; v += step) {
    grid.push(html`<line class="chart-grid" x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${n(y(v))}" y2="${n(y(v))}"/>
<text class="chart-tick" x="${LEFT - 6}" y="${n(y(v))}" text-anchor="end" dominant-baseline="central">${v}</text>`);
  }

  const bars: Html[] = [];
  days.forEach((day, i) => {
    const x = LEFT + i * slot + (slot - barWidth) / 2;
    let base = 0;
    for (const s of series) {
      const value = s.values[i] ?? 0;
      if (value > 0) {
        bars.push(
          html`<rect class="${s.className}" x="${n(x)}" y="${n(y(base + value))}" width="${n(barWidth)}" height="${n(y(base) - y(base + value))}"><title>${longDate(day)}: ${count(value, s.label)}</title></rect>`,
        );
      }
      base += value;
    }
  });

  // Hanging below the axis, whatever the text's size; the first starts at the axis, clear of the `0`.
  const labels = labelledDays(days.length).map((i) => {
    const x = i === 0 ? LEFT : LEFT + i * slot + slot / 2;
    return html`<text class="chart-tick chart-day" x="${n(x)}" y="${HEIGHT - BOTTOM + 6}" dominant-baseline="hanging" text-anchor="${i === 0 ? 'start' : 'middle'}">${shortDate(days[i] as string)}</text>`;
  });
  const empty =
    perDay.some((v) => v > 0) || days.length === 0
      ? ''
      : html`<text class="chart-empty" x="${LEFT + plotWidth / 2}" y="${TOP + plotHeight / 2}" text-anchor="middle" dominant-baseline="central">${chart.nothing}</text>`;

  const titleId = `${chart.id}-title`;
  const descId = `${chart.id}-desc`;
  return html`<svg class="chart" id="${chart.id}" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-labelledby="${titleId} ${descId}" xmlns="http://www.w3.org/2000/svg">
<title id="${titleId}">${chart.title}</title>
<desc id="${descId}">${describeChart(chart)}</desc>
${grid}
${bars}
<line class="chart-axis" x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${n(y(0))}" y2="${n(y(0))}"/>
${labels}
${empty}
<text class="chart-axis-label" x="${LEFT + plotWidth / 2}" y="${HEIGHT - 6}" text-anchor="middle">Day (UTC)</text>
<text class="chart-axis-label" x="12" y="${TOP + plotHeight / 2}" text-anchor="middle" transform="rotate(-90 12 ${TOP + plotHeight / 2})">${chart.yLabel}</text>
</svg>`;
}
