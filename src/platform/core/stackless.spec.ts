import { ApiError } from '../http/api.error';
import { DomainError } from './domain.error';

class Refused extends DomainError {
  readonly kind = 'conflict' as const;
}

describe('answer errors carry no stack', () => {
  it('a DomainError and an ApiError record no frames, and the limit is restored for every other error', () => {
    const before = Error.stackTraceLimit;
    const domain = new Refused('SOLD_OUT', 'sold out', { available: 0 });
    const api = new ApiError(499, 'CLIENT_CLOSED', 'The caller closed the connection');
    expect(domain.stack).toBe('Refused: sold out');
    expect(domain).toMatchObject({ code: 'SOLD_OUT', message: 'sold out', details: { available: 0 }, name: 'Refused' });
    expect(api).toBeInstanceOf(ApiError);
    expect(api.stack).not.toMatch(/\n\s+at /);
    expect(api.getStatus()).toBe(499);
    expect(Error.stackTraceLimit).toBe(before);
    expect(new Error('a bug').stack).toMatch(/\n\s+at /);
  });
});
