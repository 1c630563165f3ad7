import { plainToInstance } from 'class-transformer';
import { validateSync } from 'class-validator';
import { BroadcastDto, MAX_AUDIENCE } from './broadcast.dto';

const errorsFor = (audience: unknown) =>
  validateSync(plainToInstance(BroadcastDto, { title: 'Promo', content: 'Twenty percent back', audience }), { forbidUnknownValues: true }).map(
    (e) => e.property,
  );

describe(BroadcastDto.name, () => {
  it('accepts "all" and a list of account ids up to the limit', () => {
    expect(errorsFor('all')).toEqual([]);
    expect(errorsFor(['acc_1', 'acc.2', 'm:3'])).toEqual([]);
    expect(errorsFor(Array.from({ length: MAX_AUDIENCE }, (_, i) => `acc_${i}`))).toEqual([]);
  });

  it.each([
    ['another word', 'everyone'],
    ['an empty list', []],
    ['one account too many', Array.from({ length: MAX_AUDIENCE + 1 }, (_, i) => `acc_${i}`)],
    ['a bad account id', ['acc_1', 'has space']],
    ['a non-string id', ['acc_1', 7]],
    ['a missing audience', undefined],
    ['an object', { all: true }],
  ])('rejects %s, naming audience', (_what, audience) => {
    expect(errorsFor(audience)).toEqual(['audience']);
  });
});

describe(`${BroadcastDto.name} text`, () => {
  it.each([
    ['title', { title: '  ', content: 'Twenty percent back' }],
    ['content', { title: 'Promo', content: '\n\t' }],
  ])('rejects a blank %s (white space only)', (field, text) => {
    const errors = validateSync(plainToInstance(BroadcastDto, { ...text, audience: 'all' }), { forbidUnknownValues: true });
    expect(errors.map((e) => e.property)).toEqual([field]);
    expect(Object.values(errors[0].constraints ?? {})).toContain(`${field} must not be blank`);
  });
});
