/** A line chart as a standalone SVG (no dependencies): series of (x, y) points over a shared x axis. */

export interface ChartSeries {
  label: string;
  colour: string;
  points: [number, number][];
}

export interface LineChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  series: ChartSeries[];
  /** Vertical markers: an x and a label. */
  marks?: { x: number; label: string }[];
  width?: number;
  height?: number;
}

/** A tick step of 1, 2 or 5 × 10^k giving about `n` ticks over `span`. */
function niceStep(span: number, n = 6): number {
  const raw = span / n;
  const p = 10 ** Math.floor(Math.log10(raw || 1));
  return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) ?? 10 * p;
}

export function lineChartSvg(o: LineChartOptions): string {
  const W = o.width ?? 760;
  const H = o.height ?? 420;
  const m = { l: 70, r: 150, t: 46, b: 56 };
  const pw = W - m.l - m.r;
  const ph = H - m.t - m.b;
  const all = o.series.flatMap((s) => s.points);
  const xMax = Math.max(1, ...all.map((p) => p[0]));
  const yMaxRaw = Math.max(1, ...all.map((p) => p[1]));
  const xs = niceStep(xMax);
  const ys = niceStep(yMaxRaw, 5);
  const x1 = Math.ceil(xMax / xs) * xs;
  const y1 = Math.ceil(yMaxRaw / ys) * ys;
  const X = (v: number) => m.l + (v / x1) * pw;
  const Y = (v: number) => m.t + ph - (v / y1) * ph;
  const f = (v: number) => v.toFixed(1);
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${m.l}" y="24" font-size="15" font-weight="bold">${esc(o.title)}</text>`,
  ];
  for (let v = 0; v <= y1 + 1e-9; v += ys) {
    out.push(`<line x1="${m.l}" x2="${m.l + pw}" y1="${f(Y(v))}" y2="${f(Y(v))}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${m.l - 8}" y="${f(Y(v) + 4)}" text-anchor="end">${v.toLocaleString('en-US')}</text>`);
  }
  for (let v = 0; v <= x1 + 1e-9; v += xs) {
    out.push(`<line x1="${f(X(v))}" x2="${f(X(v))}" y1="${m.t}" y2="${m.t + ph}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${f(X(v))}" y="${m.t + ph + 18}" text-anchor="middle">${Number(v.toFixed(6))}</text>`);
  }
  out.push(`<rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}" fill="none" stroke="#888"/>`);
  out.push(`<text x="${m.l + pw / 2}" y="${H - 14}" text-anchor="middle">${esc(o.xLabel)}</text>`);
  out.push(`<text transform="translate(18 ${m.t + ph / 2}) rotate(-90)" text-anchor="middle">${esc(o.yLabel)}</text>`);
  (o.marks ?? []).forEach((mk, i) => {
    const x = f(X(mk.x));
    out.push(`<line x1="${x}" x2="${x}" y1="${m.t}" y2="${m.t + ph}" stroke="#555" stroke-dasharray="2 3"/>`);
    out.push(`<text x="${Number(x) + 4}" y="${m.t + 14 + 14 * (i % 3)}" fill="#555">${esc(mk.label)}</text>`);
  });
  o.series.forEach((s, k) => {
    const pts = s.points.map(([x, y]) => `${f(X(x))},${f(Y(y))}`).join(' ');
    out.push(`<polyline points="${pts}" fill="none" stroke="${s.colour}" stroke-width="2"/>`);
    const ly = m.t + 14 + k * 22;
    const lx = m.l + pw + 16;
    out.push(`<line x1="${lx}" x2="${lx + 26}" y1="${ly}" y2="${ly}" stroke="${s.colour}" stroke-width="2"/>`);
    out.push(`<text x="${lx + 32}" y="${ly + 4}">${esc(s.label)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}
