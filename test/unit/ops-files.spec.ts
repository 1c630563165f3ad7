import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Test } from '@nestjs/testing';
import { load } from 'js-yaml';
import { AppModule } from '../../src/app.module';
import { loadConfig } from '../../src/platform/config/load-config';
import { MetricsService } from '../../src/platform/metrics/metrics.service';

/**
 * The Grafana dashboard (ops/grafana/redis-pay.json) and the Prometheus alert rules (ops/prometheus/alerts.yml): the
 * rules parse and have the shape Prometheus loads, every PromQL expression is well formed as far as a tokenizer can
 * tell, and every metric either file names is one the service exports (collected from the registry of the whole
 * application, built in process; no Redis is needed, the connections are lazy).
 */
const root = join(__dirname, '..', '..');
const read = (file: string) => readFileSync(join(root, file), 'utf8');

/** PromQL's aggregations and functions, and Grafana's label_values: an identifier followed by `(`. */
const FUNCTIONS = new Set(
  (
    'sum min max avg count group stddev stdvar topk bottomk quantile count_values limitk limit_ratio ' +
    'rate irate increase delta idelta deriv predict_linear changes resets histogram_quantile histogram_count histogram_sum ' +
    'histogram_fraction avg_over_time min_over_time max_over_time sum_over_time count_over_time last_over_time ' +
    'quantile_over_time stddev_over_time stdvar_over_time present_over_time absent absent_over_time abs ceil floor round ' +
    'clamp clamp_min clamp_max exp ln log2 log10 sqrt sgn label_replace label_join time timestamp vector scalar sort ' +
    'sort_desc sort_by_label sort_by_label_desc day_of_month day_of_week day_of_year days_in_month hour minute month year ' +
    'label_values'
  ).split(' '),
);
/** Followed by a parenthesised list of label names. */
const LABEL_LISTS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);
const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'atan2', 'inf', 'nan']);
const LABEL_OPS = /^\s*(=~|!=|!~|=)\s*/;

/** The end of the string literal starting at `i` (its closing quote's index + 1). */
function skipString(s: string, i: number): number {
  const q = s[i];
  for (let j = i + 1; j < s.length; j++) {
    if (q !== '`' && s[j] === '\\') j++;
    else if (s[j] === q) return j + 1;
  }
  throw new Error(`unterminated string at ${i}`);
}

/** The index after the bracket closing the one at `i` (`(`, `{` or `[`), strings skipped. */
function skipGroup(s: string, i: number): number {
  const close = { '(': ')', '{': '}', '[': ']' }[s[i] as '(' | '{' | '['];
  for (let j = i + 1; j < s.length; j++) {
    if (s[j] === '"' || s[j] === "'" || s[j] === '`') j = skipString(s, j) - 1;
    else if (s[j] === close) return j + 1;
    else if ('({['.includes(s[j])) j = skipGroup(s, j) - 1;
    else if (')}]'.includes(s[j])) throw new Error(`'${s[j]}' at ${j} closes '${s[i]}' at ${i}`);
  }
  throw new Error(`'${s[i]}' at ${i} is never closed`);
}

/** Checks a `{…}` label matcher list: `name op "value"`, comma separated. Returns a metric named by `__name__="…"`. */
function matchers(body: string): string[] {
  const names: string[] = [];
  let rest = body.trim();
  while (rest) {
    const m = /^([a-zA-Z_][a-zA-Z0-9_]*)/.exec(rest);
    if (!m) throw new Error(`bad label matcher: ${rest}`);
    rest = rest.slice(m[0].length);
    const op = LABEL_OPS.exec(rest);
    if (!op) throw new Error(`label ${m[1]} has no matcher operator`);
    rest = rest.slice(op[0].length);
    if (!/^["'`]/.test(rest)) throw new Error(`label ${m[1]} is not matched against a string`);
    const end = skipString(rest, 0);
    if (m[1] === '__name__' && op[1] === '=') names.push(rest.slice(1, end - 1));
    rest = rest.slice(end).trim().replace(/^,\s*/, '');
  }
  return names;
}

/** The metric names a PromQL expression selects. Throws on what is not PromQL (unbalanced brackets, an unknown function, a bad matcher). */
export function metricNames(expr: string): string[] {
  const names = new Set<string>();
  let depth = 0;
  let i = 0;
  while (i < expr.length) {
    const c = expr[i];
    const rest = expr.slice(i);
    let m: RegExpExecArray | null;
    if (/\s/.test(c)) i++;
    else if (c === '#') i = expr.indexOf('\n', i) < 0 ? expr.length : expr.indexOf('\n', i);
    else if (c === '"' || c === "'" || c === '`') i = skipString(expr, i);
    else if (c === '{') {
      const end = skipGroup(expr, i);
      for (const n of matchers(expr.slice(i + 1, end - 1))) names.add(n);
      i = end;
    } else if (c === '[')
      i = skipGroup(expr, i); // a range or subquery: durations and Grafana's $__rate_interval
    else if ((m = /^\$(\{[a-zA-Z_][a-zA-Z0-9_:]*\}|[a-zA-Z_][a-zA-Z0-9_]*)/.exec(rest)))
      i += m[0].length; // a Grafana variable
    else if ((m = /^((\d+(ms|[smhdwy]))+|0x[0-9a-fA-F]+|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)/.exec(rest))) i += m[0].length;
    else if ((m = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(rest))) {
      const word = m[0];
      i += word.length;
      const next = /^\s*/.exec(expr.slice(i))![0].length + i;
      if (LABEL_LISTS.has(word)) {
        if (expr[next] === '(') i = skipGroup(expr, next);
        else if (!word.startsWith('group_')) throw new Error(`${word} needs a label list`); // group_left's is optional
      } else if (KEYWORDS.has(word.toLowerCase())) {
        // an operator or a modifier
      } else if (expr[next] === '(') {
        if (!FUNCTIONS.has(word)) throw new Error(`unknown function ${word}`);
      } else if (!(FUNCTIONS.has(word) && /^(by|without)\s*\(/.test(expr.slice(next)))) names.add(word); // `sum by (x) (…)`: an aggregation
    } else if (c === '(') {
      depth++;
      i++;
    } else if (c === ')') {
      if (--depth < 0) throw new Error(`')' at ${i} closes nothing`);
      i++;
    } else if ((m = /^(==|!=|>=|<=|[-+*/%^<>,])/.exec(rest))) i += m[0].length;
    else throw new Error(`unexpected '${c}' at ${i}`);
  }
  if (depth !== 0) throw new Error('unbalanced parentheses');
  return [...names];
}

interface Rule {
  alert?: string;
  record?: string;
  expr?: unknown;
  for?: unknown;
  labels?: Record<string, unknown>;
  annotations?: Record<string, unknown>;
}
const rules = load(read('ops/prometheus/alerts.yml')) as { groups?: { name?: unknown; rules?: Rule[] }[] };
const allRules = (rules.groups ?? []).flatMap((g) => g.rules ?? []);

interface Panel {
  title?: string;
  type?: string;
  targets?: { expr?: string }[];
  panels?: Panel[];
}
const dashboard = JSON.parse(read('ops/grafana/redis-pay.json')) as { panels: Panel[]; templating?: { list: { query?: unknown }[] } };
const panels = (list: Panel[]): Panel[] => list.flatMap((p) => [p, ...panels(p.panels ?? [])]);
const dashboardExprs = [
  ...panels(dashboard.panels).flatMap((p) => (p.targets ?? []).map((t) => ({ where: `panel "${p.title}"`, expr: t.expr ?? '' }))),
  // Grafana's label_values(<selector>, <label>): the selector is PromQL, the label is not.
  ...(dashboard.templating?.list ?? []).flatMap((v) => {
    const m = typeof v.query === 'string' ? /^label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$/.exec(v.query) : null;
    return m ? [{ where: 'variable', expr: m[1] }] : [];
  }),
];

/** Every series name the service's registry exposes (a histogram's `_bucket`, `_sum`, `_count`). */
async function exportedNames(): Promise<Set<string>> {
  const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', REDIS_URL: 'redis://127.0.0.1:1' });
  const app = await Test.createTestingModule({ imports: [AppModule.forRoot(config)] }).compile();
  const out = new Set<string>();
  for (const m of app.get(MetricsService).registry.getMetricsAsArray() as unknown as { name: string; type: string }[]) {
    out.add(m.name);
    if (m.type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) out.add(m.name + s);
    if (m.type === 'summary') for (const s of ['_sum', '_count']) out.add(m.name + s);
  }
  return out;
}

describe('PromQL metric-name extraction', () => {
  it('finds the selected metrics, not functions, labels, durations, strings or variables', () => {
    expect(
      metricNames(
        'histogram_quantile(0.99, sum by (route, le) (rate(http_request_duration_seconds_bucket{instance=~"$instance", status=~"5.."}[$__rate_interval])))',
      ),
    ).toEqual(['http_request_duration_seconds_bucket']);
    expect(metricNames('a_total / ignoring(kind) group_left b_total > bool 0.5 and on (x) c offset 5m unless {__name__="d", job="by"}')).toEqual([
      'a_total',
      'b_total',
      'c',
      'd',
    ]);
    expect(metricNames('min by (queue) (min_over_time(delay_queue_ready[1h30m])) > 1e-3')).toEqual(['delay_queue_ready']);
    expect(metricNames('sum without (le) (x) + max(y) by (z) - count')).toEqual(['x', 'y', 'count']);
  });

  it('refuses what is not PromQL', () => {
    expect(() => metricNames('sum(rate(x[5m])')).toThrow(/unbalanced/);
    expect(() => metricNames('rat(x[5m])')).toThrow(/unknown function rat/);
    expect(() => metricNames('x{status~"5.."}')).toThrow(/matcher operator/);
    expect(() => metricNames('x{kind="a}')).toThrow(/unterminated/);
    expect(() => metricNames('sum by x')).toThrow(/by needs a label list/);
  });
});

describe('Prometheus alert rules (ops/prometheus/alerts.yml)', () => {
  it('parse into groups of rules, each an alert with an expression, a severity and a summary', () => {
    expect(Array.isArray(rules.groups) && rules.groups.length > 0).toBe(true);
    const groupNames = rules.groups!.map((g) => g.name);
    expect(new Set(groupNames).size).toBe(groupNames.length);
    const problems: string[] = [];
    for (const r of allRules) {
      const name = r.alert ?? '(no alert name)';
      if (typeof r.alert !== 'string' || !/^[A-Za-z][A-Za-z0-9_]*$/.test(r.alert)) problems.push(`${name}: alert name`);
      if (typeof r.expr !== 'string' || r.expr.trim() === '') problems.push(`${name}: expr`);
      if (r.for !== undefined && !(typeof r.for === 'string' && /^(\d+(ms|[smhdwy]))+$/.test(r.for))) problems.push(`${name}: for ${String(r.for)}`);
      if (!['page', 'warning'].includes(String(r.labels?.severity))) problems.push(`${name}: severity`);
      if (typeof r.annotations?.summary !== 'string') problems.push(`${name}: summary`);
      try {
        if (typeof r.expr === 'string') metricNames(r.expr);
      } catch (err) {
        problems.push(`${name}: ${(err as Error).message}`);
      }
    }
    expect(problems).toEqual([]);
    const alerts = allRules.map((r) => r.alert);
    expect(new Set(alerts).size).toBe(alerts.length);
  });

  it('cover Redis down, the 5xx rate, dead letters, the crediting lag, a stuck rain or queue, and missing replicas', () => {
    const exprOf = (alert: string) => allRules.find((r) => r.alert === alert)?.expr;
    expect(exprOf('RedisDown')).toMatch(/redis_up/);
    expect(exprOf('Http5xxRate')).toMatch(/status=~"5\.\."/);
    expect(exprOf('DelayQueueDeadLetter')).toMatch(/delay_queue_dead_total/);
    expect(exprOf('PaymentReversalDeadLetter')).toMatch(/delay_queue_dead_total\{queue="payment-reversals"\}/);
    expect(exprOf('StreamDeadLetter')).toMatch(/outcome="dead"/);
    expect(exprOf('CreditingLagAboveGoal')).toMatch(/red_envelope_credit_lag_seconds_bucket/);
    expect(exprOf('RainStalled')).toMatch(/red_envelope_stalls_total/);
    expect(exprOf('RainCreditingStuck')).toMatch(/red_envelope_rain_envelopes/);
    expect(exprOf('DelayQueueStuck')).toMatch(/delay_queue_ready/);
    expect(exprOf('DurabilityReplicasMissing')).toMatch(/durability_replicas_missing/);
  });
});

describe('the dashboard and the rules name only metrics the service exports', () => {
  let exported: Set<string>;
  beforeAll(async () => {
    exported = await exportedNames();
  });

  it('the registry is the whole application’s (HTTP, Redis, features)', () => {
    for (const n of ['http_request_duration_seconds_bucket', 'redis_errors_total', 'delay_queue_dead_total', 'red_envelope_credit_lag_seconds_bucket'])
      expect(exported).toContain(n);
  });

  it('the dashboard: every panel has a query, every query parses, every metric is exported', () => {
    const panelsWithoutQuery = panels(dashboard.panels)
      .filter((p) => p.type !== 'row' && !(p.targets ?? []).some((t) => t.expr))
      .map((p) => p.title);
    expect(panelsWithoutQuery).toEqual([]);
    const unknown = dashboardExprs.flatMap(({ where, expr }) => metricNames(expr).flatMap((n) => (exported.has(n) ? [] : [`${where}: ${n}`])));
    expect(unknown).toEqual([]);
  });

  it('the alert rules: every metric is exported', () => {
    const unknown = allRules.flatMap((r) => metricNames(String(r.expr)).flatMap((n) => (exported.has(n) ? [] : [`${r.alert}: ${n}`])));
    expect(unknown).toEqual([]);
  });

  it('the dashboard covers what ops watch', () => {
    const names = new Set(dashboardExprs.flatMap(({ expr }) => metricNames(expr)));
    for (const n of [
      'http_request_duration_seconds_count',
      'http_request_duration_seconds_bucket',
      'redis_up',
      'redis_errors_total',
      'durability_unconfirmed_writes_total',
      'durability_replicas_missing',
      'delay_queue_lateness_seconds_bucket',
      'delay_queue_dead_total',
      'stream_pending_entries',
      'stream_entries_total',
      'red_envelope_credit_lag_seconds_bucket',
      'seckill_stock_units',
      'red_envelope_rain_envelopes',
    ])
      expect(names).toContain(n);
  });
});
