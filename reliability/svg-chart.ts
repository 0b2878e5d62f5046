/*
 * Line charts as standalone SVG files for the reliability report (docs/reliability.md links them):
 * time on the x axis, one line per series, a legend, and a <title> and <desc> for readers who do not
 * see it.
 */

export type Series = { label: string; points: ReadonlyArray<readonly [number, number]> };
export type LineChart = {
  title: string;
  /** What the y axis measures, with its unit. */
  yLabel: string;
  xLabel: string;
  series: readonly Series[];
  /** A horizontal line: a bound the series must stay under. */
  limit?: { value: number; label: string };
  /** The y axis starts at 0 unless told otherwise. */
  yMin?: number;
};

const WIDTH = 720;
const HEIGHT = 300;
const LEFT = 64;
const RIGHT = 16;
const TOP = 36;
const BOTTOM = 64;
const COLOURS = ['#1f6feb', '#d1242f', '#1a7f37', '#9a6700', '#8250df', '#57606a'];

const escapeXml = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** A round step for about `ticks` ticks over `span`. */
function step(span: number, ticks: number): number {
  const raw = span / ticks;
  const power = 10 ** Math.floor(Math.log10(raw || 1));
  const unit = [1, 2, 5, 10].find((m) => m * power >= raw) ?? 10;
  return unit * power;
}

const format = (n: number): string =>
  Math.abs(n) >= 100 || Number.isInteger(n) ? String(Math.round(n)) : n.toFixed(1);

export function lineChart(chart: LineChart): string {
  const all = chart.series.flatMap((s) => s.points);
  const xs = all.map(([x]) => x);
  const ys = all.map(([, y]) => y).concat(chart.limit ? [chart.limit.value] : []);
  const xMin = Math.min(...xs, 0);
  const xMax = Math.max(...xs, xMin + 1);
  const yMin = chart.yMin ?? 0;
  const yStep = step(Math.max(...ys, yMin + 1) - yMin, 5);
  const yMax = yMin + Math.ceil((Math.max(...ys, yMin + 1) - yMin) / yStep) * yStep;
  const plotW = WIDTH - LEFT - RIGHT;
  const plotH = HEIGHT - TOP - BOTTOM;
  const px = (x: number): number => LEFT + ((x - xMin) / (xMax - xMin)) * plotW;
  const py = (y: number): number => TOP + plotH - ((y - yMin) / (yMax - yMin)) * plotH;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${WIDTH} ${HEIGHT}" width="${WIDTH}" height="${HEIGHT}" role="img" aria-labelledby="t d" font-family="system-ui, sans-serif" font-size="12">`,
  );
  const summary = chart.series
    .map((s) => {
      const v = s.points.map(([, y]) => y);
      return `${s.label}: from ${format(v[0] ?? 0)} to ${format(v.at(-1) ?? 0)}, between ${format(Math.min(...v))} and ${format(Math.max(...v))}`;
    })
    .join('; ');
  out.push(`<title id="t">${escapeXml(chart.title)}</title>`);
  out.push(`<desc id="d">${escapeXml(`${chart.yLabel} against ${chart.xLabel}. ${summary}.`)}</desc>`);
  out.push(`<rect width="${WIDTH}" height="${HEIGHT}" fill="#ffffff"/>`);
  out.push(`<text x="${LEFT}" y="20" font-size="14" font-weight="600">${escapeXml(chart.title)}</text>`);
  for (let y = yMin; y <= yMax + yStep / 2; y += yStep) {
    out.push(`<line x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${py(y)}" y2="${py(y)}" stroke="#d0d7de"/>`);
    out.push(`<text x="${LEFT - 6}" y="${py(y) + 4}" text-anchor="end">${format(y)}</text>`);
  }
  const xStep = step(xMax - xMin, 10);
  for (let x = Math.ceil(xMin / xStep) * xStep; x <= xMax; x += xStep) {
    out.push(
      `<line x1="${px(x)}" x2="${px(x)}" y1="${TOP + plotH}" y2="${TOP + plotH + 4}" stroke="#57606a"/>`,
    );
    out.push(`<text x="${px(x)}" y="${TOP + plotH + 16}" text-anchor="middle">${format(x)}</text>`);
  }
  out.push(
    `<text x="${LEFT + plotW / 2}" y="${HEIGHT - 30}" text-anchor="middle">${escapeXml(chart.xLabel)}</text>`,
  );
  out.push(
    `<text transform="translate(14 ${TOP + plotH / 2}) rotate(-90)" text-anchor="middle">${escapeXml(chart.yLabel)}</text>`,
  );
  if (chart.limit) {
    const y = py(chart.limit.value);
    out.push(
      `<line x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${y}" y2="${y}" stroke="#57606a" stroke-dasharray="6 4"/>`,
    );
    out.push(
      `<text x="${WIDTH - RIGHT - 4}" y="${y - 4}" text-anchor="end" fill="#57606a">${escapeXml(chart.limit.label)}</text>`,
    );
  }
  chart.series.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length];
    const d = s.points
      .map(([x, y], j) => `${j === 0 ? 'M' : 'L'}${px(x).toFixed(1)} ${py(y).toFixed(1)}`)
      .join(' ');
    out.push(`<path d="${d}" fill="none" stroke="${colour}" stroke-width="1.5"/>`);
    const lx = LEFT + i * 170;
    out.push(
      `<line x1="${lx}" x2="${lx + 18}" y1="${HEIGHT - 10}" y2="${HEIGHT - 10}" stroke="${colour}" stroke-width="3"/>`,
    );
    out.push(`<text x="${lx + 24}" y="${HEIGHT - 6}">${escapeXml(s.label)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
