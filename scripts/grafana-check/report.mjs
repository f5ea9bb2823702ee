// Turns tsc's messages about the generated check.ts into one line per error that
// names the dashboard file and the part of it (panels[2].options, ...).
// usage: node report.mjs DASHBOARD.json CHECK.ts TSC_OUTPUT.txt ; exit 0 when no error
import { readFileSync } from 'node:fs';

const [dashFile, checkTs, tscOut] = process.argv.slice(2);
const src = readFileSync(checkTs, 'utf8').split('\n');
const paths = JSON.parse(readFileSync(checkTs.replace(/\.ts$/, '.paths.json'), 'utf8'));
const out = readFileSync(tscOut, 'utf8').split('\n');

const errors = [];
for (let i = 0; i < out.length; i++) {
  const m = out[i].match(/^(.*?)\((\d+),(\d+)\): error (TS\d+): (.*)$/);
  if (!m) {
    if (out[i].startsWith('  ') && errors.length) errors[errors.length - 1].more.push(out[i].trim());
    else if (out[i].trim()) errors.push({ where: '(tsc)', text: out[i].trim(), more: [] });
    continue;
  }
  const line = Number(m[2]);
  let where = 'the generated check';
  for (let l = line - 1; l >= 0; l--) {
    const c = src[l].match(/^export const (\w+)/);
    if (c) { where = paths[c[1]] || c[1]; break; }
  }
  const at = (src[line - 1] || '').trim().replace(/,$/, '');
  const text = m[5].length > 240 ? m[5].slice(0, 240) + '…' : m[5];
  errors.push({ where, at, text: `${text} [${m[4]}]`, more: [] });
}

if (errors.length === 0) {
  console.log(`PASS ${dashFile}: valid against Grafana's dashboard schema (@grafana/schema)`);
  process.exit(0);
}
console.log(`FAIL ${dashFile}: ${errors.length} error(s) against Grafana's dashboard schema (@grafana/schema)`);
for (const e of errors) {
  console.log(`  ${dashFile}: ${e.where}${e.at ? `: at ${e.at.length > 100 ? e.at.slice(0, 100) + '…' : e.at}` : ''}`);
  console.log(`    ${e.text}`);
  for (const x of e.more.slice(0, 4)) console.log(`    ${x.length > 240 ? x.slice(0, 240) + '…' : x}`);
}
process.exit(1);
