// Writes check.ts: the dashboard JSON as fresh object literals, each declared with
// its type from Grafana's published schema types (@grafana/schema), so that
// TypeScript reports wrong types, missing required fields and unknown fields
// (excess property checks only apply to fresh literals, not to an imported JSON module).
//
// usage: node gen-check.mjs DASHBOARD.json OUT.ts  (also writes OUT.paths.json: which
// part of the dashboard each checked constant is, for the error messages)
import { readFileSync, writeFileSync } from 'node:fs';

const [src, out] = process.argv.slice(2);
let dash;
try {
  dash = JSON.parse(readFileSync(src, 'utf8'));
} catch (e) {
  console.error(e.message);
  process.exit(1);
}

// The export envelope (__inputs, __requires, __elements) is read by Grafana's
// import API, not part of the dashboard model: check only its basic shape here.
const envelope = {};
for (const k of ['__inputs', '__requires', '__elements']) {
  if (k in dash) { envelope[k] = dash[k]; delete dash[k]; }
}

const lit = (v) => JSON.stringify(v, null, 2);
const lines = [];
const paths = {}; // const name -> where it is in the dashboard JSON
lines.push(`// generated from ${src} by scripts/grafana-check/gen-check.mjs: do not edit`);
lines.push(`import type { Dashboard, Panel, RowPanel, AnnotationQuery, DataQuery, VariableModel } from '@grafana/schema';`);
lines.push(`import type { Options as TimeSeriesOptions, FieldConfig as TimeSeriesFieldConfig } from '@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen';`);
lines.push(`
// JSON cannot name a TypeScript string enum member: accept each string enum's values
// (\`\${E}\` is the union of E's string values); numeric enums take number literals as they are.
type Json<T> = T extends string ? \`\${T}\`
  : T extends readonly (infer U)[] ? Json<U>[]
  : T extends object ? { [K in keyof T]: Json<T[K]> }
  : T;

// A panel query: the schema's DataQuery (refId, hide, datasource, ...) plus the
// datasource plugin's own fields, which @grafana/schema leaves open.
type Target = Json<DataQuery> & Record<string, unknown>;

// A timeseries panel: the dashboard schema's Panel with the timeseries plugin's
// published Options and FieldConfig in place of the open records.
type TimeSeriesPanel = Json<Omit<Panel, 'options' | 'fieldConfig' | 'targets' | 'type'>> & {
  type: 'timeseries';
  options?: Json<TimeSeriesOptions>;
  fieldConfig?: Json<Omit<NonNullable<Panel['fieldConfig']>, 'defaults'>> & {
    defaults: Json<Omit<NonNullable<Panel['fieldConfig']>['defaults'], 'custom'>> & { custom?: Json<TimeSeriesFieldConfig> };
  };
  targets?: Target[];
};
type AnyPanel = Json<Omit<Panel, 'targets'>> & { targets?: Target[] };

// A datasource annotation: the schema's AnnotationQuery, plus the fields Grafana's
// Prometheus annotation support reads from the annotation itself, which the schema
// leaves to the plugin: titleFormat, textFormat, tagKeys, useValueForTime, and the
// query as expr and step. Grafana up to 11 reads the query only from expr/step; from
// 12 on it moves them into target (expr, interval) when it loads the dashboard, so
// expr/step is the form every version reads.
type PromAnnotationFields = {
  expr?: string; step?: string;
  titleFormat?: string; textFormat?: string; tagKeys?: string; useValueForTime?: boolean;
};
type Annotation = Json<Omit<AnnotationQuery, 'target'>> & { target?: Target } & PromAnnotationFields;

// A variable: the schema's VariableModel. Grafana also saves a query variable's
// \`definition\` (the query as shown in the variables list); the classic schema omits
// it, the same package's v2 schema has it (QueryVariableSpec.definition).
type Variable = Json<VariableModel> & { definition?: string };

type Envelope = {
  __inputs?: { name: string; label: string; description?: string; type: string; pluginId: string; pluginName: string }[];
  __requires?: { type: 'grafana' | 'datasource' | 'panel'; id: string; name: string; version: string }[];
  __elements?: Record<string, unknown>;
};
`);
lines.push(`export const envelope: Envelope = ${lit(envelope)};`);

const panelRefs = [];
(dash.panels || []).forEach((p, i) => {
  const name = `panel${i}`;
  const t = p.type === 'timeseries' ? 'TimeSeriesPanel' : p.type === 'row' ? 'Json<RowPanel>' : 'AnyPanel';
  lines.push(`// panels[${i}]: id ${p.id}, "${p.title}"`);
  // TypeScript stops at the first error in one literal: check each part of a panel
  // on its own too, so that one run names every broken part.
  const q = { ...p };
  for (const part of ['options', 'fieldConfig', 'gridPos', 'datasource']) {
    if (part in p && p[part] !== null && typeof p[part] === 'object') {
      paths[`${name}_${part}`] = `panels[${i}].${part} ("${p.title}")`;
      lines.push(`export const ${name}_${part}: NonNullable<${t}['${part}']> = ${lit(p[part])};`);
      q[part] = `@@${name}_${part}@@`;
    }
  }
  if (Array.isArray(p.targets)) {
    q.targets = p.targets.map((tg, j) => {
      paths[`${name}_target${j}`] = `panels[${i}].targets[${j}] ("${p.title}")`;
      lines.push(`export const ${name}_target${j}: Target = ${lit(tg)};`);
      return `@@${name}_target${j}@@`;
    });
  }
  paths[name] = `panels[${i}] ("${p.title}")`;
  lines.push(`export const ${name}: ${t} = ${lit(q).replace(/"@@(\w+)@@"/g, '$1')};`);
  panelRefs.push(name);
});
const annRefs = [];
((dash.annotations && dash.annotations.list) || []).forEach((a, i) => {
  const name = `annotation${i}`;
  lines.push(`// annotations.list[${i}]: "${a.name}"`);
  paths[name] = `annotations.list[${i}] ("${a.name}")`;
  lines.push(`export const ${name}: Annotation = ${lit(a)};`);
  annRefs.push(name);
});
const varRefs = [];
((dash.templating && dash.templating.list) || []).forEach((v, i) => {
  const name = `variable${i}`;
  lines.push(`// templating.list[${i}]: "${v.name}"`);
  paths[name] = `templating.list[${i}] ("${v.name}")`;
  lines.push(`export const ${name}: Variable = ${lit(v)};`);
  varRefs.push(name);
});

// The rest of the dashboard, with the parts above put back by reference.
const rest = { ...dash };
const marker = (refs) => refs.map((r) => `@@${r}@@`);
if ('panels' in rest) rest.panels = marker(panelRefs);
if (rest.annotations) rest.annotations = { ...rest.annotations, list: marker(annRefs) };
if (rest.templating) rest.templating = { ...rest.templating, list: marker(varRefs) };
const body = lit(rest).replace(/"@@(\w+)@@"/g, '$1');
lines.push(`// the dashboard itself`);
paths.dashboard = 'the dashboard (top level)';
paths.envelope = '__inputs / __requires';
lines.push(`export const dashboard: Json<Dashboard> = ${body};`);
writeFileSync(out, lines.join('\n') + '\n');
writeFileSync(out.replace(/\.ts$/, '.paths.json'), JSON.stringify(paths, null, 2) + '\n');
