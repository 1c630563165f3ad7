import { clipUnits } from '../../platform/core/text';
/**
 * The reminder's title and content templates: `{subject}`, `{amount}` (in the
 * order's currency), `{currency}`, `{closeAt}` and `{minutes}` are filled in
 * when the reminder is sent; any other `{…}` is refused when settings are saved.
 */
export const PLACEHOLDERS = ['subject', 'amount', 'currency', 'closeAt', 'minutes'] as const;
export type Placeholder = (typeof PLACEHOLDERS)[number];

/** Longest templates, in characters; rendered text is cut to the message center's limits. */
export const MAX_TITLE_TEMPLATE = 100;
export const MAX_CONTENT_TEMPLATE = 1000;
/** The message center's limits (see WriteMessageDto). */
const MAX_TITLE = 100;
const MAX_CONTENT = 2000;

export const DEFAULT_TITLE = '[Payment reminder] {subject}';
export const DEFAULT_CONTENT = 'Your order for {subject} ({amount}) closes in {minutes} minutes; pay now so you don’t miss it.';

const TOKEN_RE = /\{([^{}]*)\}/g;
/** A placeholder as filled in: `{minutes} minutes` also takes the word, so one minute reads "1 minute". */
const FILL_RE = /\{([^{}]*)\}( minutes\b)?/g;

/** The placeholders of `template` that are not known, in order of appearance. */
export function unknownPlaceholders(template: string): string[] {
  const names = [...template.matchAll(TOKEN_RE)].map((m) => m[1]);
  return [...new Set(names.filter((n) => !(PLACEHOLDERS as readonly string[]).includes(n)))];
}

/** What fills the placeholders. */
export interface ReminderFacts {
  subject: string;
  /** Minor units. */
  amount: number;
  currency: string;
  /** The order's close time, epoch ms. */
  closeAt: number;
  /** When the reminder is sent, epoch ms (Redis clock). */
  now: number;
}

/** One formatter per currency (building one costs far more than using it). Currencies are the ISO 4217 list: bounded. */
const FORMATS = new Map<string, { format: Intl.NumberFormat; digits: number }>();

/** `amount` minor units as the currency writes them, e.g. 12800 CNY → "CN¥128.00", 500 JPY → "¥500". */
export function formatAmount(amount: number, currency: string): string {
  let f = FORMATS.get(currency);
  if (!f) {
    const format = new Intl.NumberFormat('en', { style: 'currency', currency });
    f = { format, digits: format.resolvedOptions().maximumFractionDigits ?? 2 };
    FORMATS.set(currency, f);
  }
  const { format, digits } = f;
  // Intl puts a no-break space between a code and the number; a plain one reads the same in every inbox.
  return format.format(amount / 10 ** digits).replace(/\u00a0/g, ' ');
}

/** The close time as `2026-11-24 15:30 UTC`. */
export function formatCloseAt(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** Fills the placeholders of `template`; each value is made on first use and kept in `made` for the next template. */
function fill(template: string, facts: ReminderFacts, made: Partial<Record<Placeholder, string>>): string {
  const value = (name: Placeholder): string => {
    let v = made[name];
    if (v === undefined) {
      if (name === 'subject') v = facts.subject;
      else if (name === 'amount') v = formatAmount(facts.amount, facts.currency);
      else if (name === 'currency') v = facts.currency;
      else if (name === 'closeAt') v = formatCloseAt(facts.closeAt);
      else v = String(Math.max(1, Math.round((facts.closeAt - facts.now) / 60_000)));
      made[name] = v;
    }
    return v;
  };
  return template.replace(FILL_RE, (all: string, name: string, unit: string | undefined) => {
    if (!(PLACEHOLDERS as readonly string[]).includes(name)) return all;
    const v = value(name as Placeholder);
    if (unit === undefined) return v;
    return name === 'minutes' && v === '1' ? `${v} minute` : `${v}${unit}`;
  });
}

/** `text` in at most `max` UTF-16 units, ending in `…` when cut, never cutting a surrogate pair in half. */
const cut = (text: string, max: number) => (text.length <= max ? text : `${clipUnits(text, max - 1)}…`);

/** The title and content of one reminder, within the message center's limits. */
export function renderReminder(templates: { title: string; content: string }, facts: ReminderFacts): { title: string; content: string } {
  const made: Partial<Record<Placeholder, string>> = {};
  return { title: cut(fill(templates.title, facts, made), MAX_TITLE), content: cut(fill(templates.content, facts, made), MAX_CONTENT) };
}
