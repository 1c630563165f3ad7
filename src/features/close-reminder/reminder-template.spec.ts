import { DEFAULT_CONTENT, DEFAULT_TITLE, formatAmount, formatCloseAt, renderReminder, unknownPlaceholders } from './reminder-template';

describe('reminder templates', () => {
  const facts = { subject: 'Coffee beans', amount: 12800, currency: 'CNY', closeAt: Date.UTC(2026, 10, 24, 15, 30), now: Date.UTC(2026, 10, 24, 15, 10) };

  it('fills every placeholder', () => {
    const r = renderReminder({ title: '[Payment reminder] {subject}', content: '{amount} {currency} closes at {closeAt}, in {minutes} minutes' }, facts);
    expect(r).toEqual({ title: '[Payment reminder] Coffee beans', content: 'CN¥128.00 CNY closes at 2026-11-24 15:30 UTC, in 20 minutes' });
  });

  it('formats amounts with the currency’s own minor units', () => {
    expect(formatAmount(500, 'JPY')).toBe('¥500');
    expect(formatAmount(1999, 'USD')).toBe('$19.99');
    expect(formatAmount(1234, 'BHD')).toBe('BHD 1.234');
    expect(formatCloseAt(Date.UTC(2026, 0, 2, 3, 4, 59))).toBe('2026-01-02 03:04 UTC');
  });

  it('names unknown placeholders once each, and accepts the known ones', () => {
    expect(unknownPlaceholders('{subject} {amount} {currency} {closeAt} {minutes}')).toEqual([]);
    expect(unknownPlaceholders('Hi {name}, {name} {Subject} {}')).toEqual(['name', 'Subject', '']);
  });

  it('cuts rendered text to the message center’s limits', () => {
    const r = renderReminder({ title: '{subject}{subject}', content: '{subject}' }, { ...facts, subject: 'x'.repeat(128) });
    expect(r.title).toHaveLength(100);
    expect(r.title.endsWith('…')).toBe(true);
    expect(r.content).toBe('x'.repeat(128));
  });

  it('never cuts an emoji in half', () => {
    // 'xy' and 64 emoji: the 99th unit (the last one before the ellipsis) is the first half of an emoji.
    const r = renderReminder({ title: '{subject}', content: '{subject}' }, { ...facts, subject: `xy${'😀'.repeat(64)}` });
    expect(r.title).toBe(`xy${'😀'.repeat(48)}…`);
    expect(r.title.length).toBeLessThanOrEqual(100);
  });

  it('says "1 minute", not "1 minutes", in the default text and in any template that writes "{minutes} minutes"', () => {
    const oneLeft = { ...facts, now: facts.closeAt - 50_000 };
    expect(renderReminder({ title: DEFAULT_TITLE, content: DEFAULT_CONTENT }, oneLeft).content).toBe(
      'Your order for Coffee beans (CN¥128.00) closes in 1 minute; pay now so you don’t miss it.',
    );
    expect(renderReminder({ title: '{minutes} minutes', content: 'in {minutes} minutes, {minutes} minutes' }, oneLeft)).toEqual({
      title: '1 minute',
      content: 'in 1 minute, 1 minute',
    });
    expect(renderReminder({ title: 't', content: 'closes in {minutes} minutes' }, { ...facts, now: facts.closeAt - 120_000 }).content).toBe(
      'closes in 2 minutes',
    );
    // Only the word that follows the placeholder: other text is the merchant's own.
    expect(renderReminder({ title: 't', content: '{minutes} minutesworth, {minutes} min' }, oneLeft).content).toBe('1 minutesworth, 1 min');
  });

  it('never says less than one minute', () => {
    expect(renderReminder({ title: 't', content: '{minutes}' }, { ...facts, now: facts.closeAt - 10_000 }).content).toBe('1');
  });
});
