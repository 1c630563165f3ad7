import { fastPathFor } from '../../platform/http/fast-path';
import { commandFailure } from '../../../test/support/command-failure';
import { MAX_AMOUNT } from '../../platform/core/money';
import { OrderCommandDto } from './dto/create-order.dto';
import { type CreateOrderCommand, MAX_EXPIRE_MINUTES } from './order.commands';

/** An in-process order command is checked by the HTTP create's DTO rules (OrderCommandDto, through the global pipe). */
describe('order commands (validateCommand with OrderCommandDto)', () => {
  const sound: CreateOrderCommand = {
    merchantId: 'm_1',
    merchantOrderNo: 'M-1',
    amount: 12800,
    currency: 'CNY',
    subject: 'Coffee',
    expireMinutes: 30,
    payerAccountId: 'u_1',
  };
  const fieldOf = async (command: object) => (await commandFailure(OrderCommandDto, command))?.field;

  it('accepts a sound command, with or without its optional fields, and the service’s own flash-sale numbers', async () => {
    expect(await fieldOf(sound)).toBeUndefined();
    expect(await fieldOf({ merchantId: 'm.1', merchantOrderNo: 'M-1', amount: 1, currency: 'USD', subject: 'x' })).toBeUndefined();
    expect(await fieldOf({ ...sound, amount: MAX_AMOUNT, expireMinutes: MAX_EXPIRE_MINUTES })).toBeUndefined();
    expect(await fieldOf({ ...sound, merchantId: 'm:1', merchantOrderNo: `sk_${'a1'.repeat(12)}` })).toBeUndefined();
  });

  it('has a fast path, so checking a sound command again costs no class-transformer copy', () => {
    expect(fastPathFor(OrderCommandDto)).toBeDefined();
  });

  it.each([
    ['merchantId', { merchantId: '' }],
    ['merchantId', { merchantId: 'has space' }],
    ['merchantId', { merchantId: undefined }],
    ['merchantOrderNo', { merchantOrderNo: 'has space' }],
    ['merchantOrderNo', { merchantOrderNo: 'x'.repeat(65) }],
    ['amount', { amount: 0 }],
    ['amount', { amount: 12.5 }],
    ['amount', { amount: MAX_AMOUNT + 1 }],
    ['amount', { amount: '12800' }],
    ['currency', { currency: 'cny' }],
    ['currency', { currency: 'QQQ' }],
    ['subject', { subject: '' }],
    ['subject', { subject: 'x'.repeat(129) }],
    ['subject', { subject: 'a\u202eb' }],
    ['subject', { subject: '\u200b' }],
    ['expireMinutes', { expireMinutes: 0 }],
    ['expireMinutes', { expireMinutes: MAX_EXPIRE_MINUTES + 1 }],
    ['expireMinutes', { expireMinutes: null }],
    ['payerAccountId', { payerAccountId: '' }],
    ['payerAccountId', { payerAccountId: '.' }],
    ['payerAccountId', { payerAccountId: 'a b' }],
    ['payerAccountId', { payerAccountId: null }],
    ['note', { note: 'an unknown field' }],
  ])('names %s for %j', async (field, change) => {
    expect(await fieldOf({ ...sound, ...(change as object) })).toBe(field);
  });
});
