import { MAX_AMOUNT } from '../kernel/money';
import { type CreateOrderCommand, MAX_EXPIRE_MINUTES, orderCommandProblem } from './order-commands';

describe('orderCommandProblem', () => {
  const sound: CreateOrderCommand = {
    merchantId: 'm_1',
    merchantOrderNo: 'M-1',
    amount: 12800,
    currency: 'CNY',
    subject: 'Coffee',
    expireMinutes: 30,
    payerAccountId: 'u_1',
  };

  it('accepts a sound command, with or without its optional fields', () => {
    expect(orderCommandProblem(sound)).toBeUndefined();
    expect(orderCommandProblem({ merchantId: 'm.1', merchantOrderNo: 'M-1', amount: 1, currency: 'USD', subject: 'x' })).toBeUndefined();
    expect(orderCommandProblem({ ...sound, amount: MAX_AMOUNT, expireMinutes: MAX_EXPIRE_MINUTES })).toBeUndefined();
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
    ['expireMinutes', { expireMinutes: 0 }],
    ['expireMinutes', { expireMinutes: MAX_EXPIRE_MINUTES + 1 }],
    ['expireMinutes', { expireMinutes: null }],
    ['payerAccountId', { payerAccountId: '' }],
    ['payerAccountId', { payerAccountId: '.' }],
    ['payerAccountId', { payerAccountId: 'a b' }],
    ['payerAccountId', { payerAccountId: null }],
  ])('names %s for %j', (field, change) => {
    expect(orderCommandProblem({ ...sound, ...(change as object) } as CreateOrderCommand)?.field).toBe(field);
  });
});
