// Two small chart kinds as plain SVG text (no dependency): lines over a numeric x axis, and labelled bars.

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#17becf'];
const FONT = 'font-family="Helvetica, Arial, sans-serif"';

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** 1, 2 or 5 times a power of ten, so that about `count` steps cover `range`. */
export function niceStep(range: number, count = 5): number {
  if (!(range > 0)) return 1;
  const raw = range / count;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const m = raw / pow;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * pow;
}

function fmtTick(v: number): string {
  if (v === 0) return '0';
  if (Math.abs(v) >= 1000) return v.toLocaleString('en-US', { maximumFractionDigits: 0 });
  return String(Math.round(v * 1000) / 1000);
}

interface Frame {
  width: number;
  height: number;
  left: number;
  right: number;
  top: number;
  bottom: number;
}

/** The chart's frame: title, horizontal grid lines with their y ticks up to `yMax`, both axes and the y label. */
function frame(f: Frame, title: string, yLabel: string, yMax: number, yStep: number, Y: (y: number) => number): string[] {
  const pw = f.width - f.left - f.right;
  const bottom = f.height - f.bottom;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${f.width}" height="${f.height}" viewBox="0 0 ${f.width} ${f.height}" ${FONT} font-size="12">`,
    `<rect width="${f.width}" height="${f.height}" fill="white"/>`,
    `<text x="${f.width / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">${esc(title)}</text>`,
  ];
  for (let y = 0; y <= yMax + 1e-9; y += yStep) {
    out.push(`<line x1="${f.left}" x2="${f.left + pw}" y1="${Y(y).toFixed(1)}" y2="${Y(y).toFixed(1)}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${f.left - 6}" y="${(Y(y) + 4).toFixed(1)}" text-anchor="end">${fmtTick(y)}</text>`);
  }
  out.push(`<line x1="${f.left}" x2="${f.left + pw}" y1="${bottom}" y2="${bottom}" stroke="#333"/>`);
  out.push(`<line x1="${f.left}" x2="${f.left}" y1="${f.top}" y2="${bottom}" stroke="#333"/>`);
  out.push(`<text transform="translate(16 ${f.top + (bottom - f.top) / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`);
  return out;
}

export function lineChart(o: {
  title: string;
  xLabel: string;
  yLabel: string;
  series: { name: string; points: [number, number][]; color?: string }[];
  hLines?: { y: number; label: string }[];
}): string {
  const width = 720;
  const perRow = Math.max(1, Math.floor((width - 70) / 230));
  const legendRows = Math.ceil(o.series.length / perRow);
  const f: Frame = { width, height: 400 + (legendRows - 1) * 18, left: 70, right: 20, top: 40, bottom: 52 + legendRows * 18 };
  const pw = f.width - f.left - f.right;
  const ph = f.height - f.top - f.bottom;
  const all = o.series.flatMap((s) => s.points);
  const xMaxRaw = Math.max(1e-9, ...all.map((p) => p[0]));
  const yMaxRaw = Math.max(1e-9, ...all.map((p) => p[1]), ...(o.hLines ?? []).map((h) => h.y));
  const xStep = niceStep(xMaxRaw);
  const yStep = niceStep(yMaxRaw);
  const xMax = Math.ceil(xMaxRaw / xStep) * xStep;
  const yMax = Math.ceil(yMaxRaw / yStep) * yStep;
  const X = (x: number): number => f.left + (x / xMax) * pw;
  const Y = (y: number): number => f.top + ph - (y / yMax) * ph;
  const out = frame(f, o.title, o.yLabel, yMax, yStep, Y);
  for (let x = 0; x <= xMax + 1e-9; x += xStep) {
    out.push(`<line x1="${X(x).toFixed(1)}" x2="${X(x).toFixed(1)}" y1="${f.top + ph}" y2="${f.top + ph + 4}" stroke="#333"/>`);
    out.push(`<text x="${X(x).toFixed(1)}" y="${f.top + ph + 18}" text-anchor="middle">${fmtTick(x)}</text>`);
  }
  out.push(`<text x="${f.left + pw / 2}" y="${f.top + ph + 36}" text-anchor="middle">${esc(o.xLabel)}</text>`);
  for (const h of o.hLines ?? []) {
    out.push(`<line x1="${f.left}" x2="${f.left + pw}" y1="${Y(h.y).toFixed(1)}" y2="${Y(h.y).toFixed(1)}" stroke="#888" stroke-dasharray="5 4"/>`);
    out.push(`<text x="${f.left + pw - 4}" y="${(Y(h.y) - 4).toFixed(1)}" text-anchor="end" fill="#555">${esc(h.label)}</text>`);
  }
  o.series.forEach((s, i) => {
    const color = s.color ?? PALETTE[i % PALETTE.length]!;
    if (s.points.length > 0) {
      const d = s.points.map((p, j) => `${j === 0 ? 'M' : 'L'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(' ');
      out.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="2"/>`);
    }
    const ly = f.top + ph + 54 + Math.floor(i / perRow) * 18;
    const lx = f.left + (i % perRow) * 230;
    out.push(`<line x1="${lx}" x2="${lx + 20}" y1="${ly - 4}" y2="${ly - 4}" stroke="${color}" stroke-width="3"/>`);
    out.push(`<text x="${lx + 26}" y="${ly}">${esc(s.name)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

export function barChart(o: {
  title: string;
  yLabel: string /** `text`: printed above the bar instead of the value. */;
  bars: { label: string; value: number; text?: string }[];
  target?: { y: number; label: string };
}): string {
  const f: Frame = { width: Math.max(480, 90 * o.bars.length + 120), height: 380, left: 70, right: 20, top: 40, bottom: 80 };
  const pw = f.width - f.left - f.right;
  const ph = f.height - f.top - f.bottom;
  const yMaxRaw = Math.max(1e-9, ...o.bars.map((b) => b.value), o.target?.y ?? 0);
  const yStep = niceStep(yMaxRaw);
  const yMax = Math.ceil((yMaxRaw * 1.08) / yStep) * yStep;
  const Y = (y: number): number => f.top + ph - (y / yMax) * ph;
  const out = frame(f, o.title, o.yLabel, yMax, yStep, Y);
  const slot = pw / Math.max(1, o.bars.length);
  const bw = Math.min(60, slot * 0.6);
  o.bars.forEach((b, i) => {
    const cx = f.left + slot * (i + 0.5);
    const color = PALETTE[i % PALETTE.length]!;
    const y = Y(Math.max(0, b.value));
    out.push(`<rect x="${(cx - bw / 2).toFixed(1)}" y="${y.toFixed(1)}" width="${bw.toFixed(1)}" height="${(f.top + ph - y).toFixed(1)}" fill="${color}"/>`);
    out.push(`<text x="${cx.toFixed(1)}" y="${(y - 5).toFixed(1)}" text-anchor="middle">${esc(b.text ?? fmtTick(b.value))}</text>`);
    const words = b.label.split(' ');
    const lines: string[] = [];
    for (const w of words) {
      const lastLine = lines.at(-1);
      if (lastLine !== undefined && (lastLine + ' ' + w).length <= Math.max(10, Math.floor(slot / 7))) lines[lines.length - 1] = `${lastLine} ${w}`;
      else lines.push(w);
    }
    for (const [j, l] of lines.slice(0, 3).entries())
      out.push(`<text x="${cx.toFixed(1)}" y="${f.top + ph + 16 + j * 14}" text-anchor="middle">${esc(l)}</text>`);
  });
  if (o.target) {
    out.push(
      `<line x1="${f.left}" x2="${f.left + pw}" y1="${Y(o.target.y).toFixed(1)}" y2="${Y(o.target.y).toFixed(1)}" stroke="#d62728" stroke-dasharray="6 4"/>`,
    );
    out.push(`<text x="${f.left + 4}" y="${(Y(o.target.y) - 5).toFixed(1)}" text-anchor="start" fill="#d62728">${esc(o.target.label)}</text>`);
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
