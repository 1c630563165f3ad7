/** A line chart as a standalone SVG (no dependencies): series of (x, y) points over a shared x axis. */
export interface LineChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  series: { label: string; colour: string; points: [number, number][] }[];
}

/** A tick step of 1, 2 or 5 × 10^k giving about `n` ticks over `span`. */
const niceStep = (span: number, n: number) =>
  ((p) => [1, 2, 5, 10].map((m) => m * p).find((s) => s >= span / n) ?? 10 * p)(10 ** Math.floor(Math.log10(span / n || 1)));

export function lineChartSvg(o: LineChartOptions): string {
  const [W, H, m] = [760, 420, { l: 70, r: 150, t: 46, b: 56 }];
  const [pw, ph] = [W - m.l - m.r, H - m.t - m.b];
  const all = o.series.flatMap((s) => s.points);
  const [xMax, yMax] = [Math.max(1, ...all.map((p) => p[0])), Math.max(1, ...all.map((p) => p[1]))];
  const [xs, ys] = [niceStep(xMax, 6), niceStep(yMax, 5)];
  const [x1, y1] = [Math.ceil(xMax / xs) * xs, Math.ceil(yMax / ys) * ys];
  const X = (v: number) => (m.l + (v / x1) * pw).toFixed(1);
  const Y = (v: number) => (m.t + ph - (v / y1) * ph).toFixed(1);
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${m.l}" y="24" font-size="15" font-weight="bold">${esc(o.title)}</text>`,
  ];
  for (let v = 0; v <= y1 + 1e-9; v += ys)
    out.push(
      `<line x1="${m.l}" x2="${m.l + pw}" y1="${Y(v)}" y2="${Y(v)}" stroke="#e5e5e5"/>`,
      `<text x="${m.l - 8}" y="${Number(Y(v)) + 4}" text-anchor="end">${v.toLocaleString('en-US')}</text>`,
    );
  for (let v = 0; v <= x1 + 1e-9; v += xs)
    out.push(
      `<line x1="${X(v)}" x2="${X(v)}" y1="${m.t}" y2="${m.t + ph}" stroke="#e5e5e5"/>`,
      `<text x="${X(v)}" y="${m.t + ph + 18}" text-anchor="middle">${Number(v.toFixed(6))}</text>`,
    );
  out.push(
    `<rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}" fill="none" stroke="#888"/>`,
    `<text x="${m.l + pw / 2}" y="${H - 14}" text-anchor="middle">${esc(o.xLabel)}</text>`,
    `<text transform="translate(18 ${m.t + ph / 2}) rotate(-90)" text-anchor="middle">${esc(o.yLabel)}</text>`,
  );
  o.series.forEach((s, k) => {
    const [lx, ly] = [m.l + pw + 16, m.t + 14 + k * 22];
    out.push(
      `<polyline points="${s.points.map(([x, y]) => `${X(x)},${Y(y)}`).join(' ')}" fill="none" stroke="${s.colour}" stroke-width="2"/>`,
      `<line x1="${lx}" x2="${lx + 26}" y1="${ly}" y2="${ly}" stroke="${s.colour}" stroke-width="2"/>`,
      `<text x="${lx + 32}" y="${ly + 4}">${esc(s.label)}</text>`,
    );
  });
  return `${out.join('\n')}\n</svg>\n`;
}
