// The one text table of the CLI (status, status --networks): columns padded to their widest cell, three spaces
// apart, as kubectl prints them; then the numbered notes that explain a row, after a blank line.

export function textTable(headers: readonly string[], rows: readonly (readonly string[])[], notes: readonly string[] = []): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('   ')
      .trimEnd();
  return `${[line(headers), ...rows.map(line), ...(notes.length > 0 ? ['', ...notes] : [])].join('\n')}\n`;
}
