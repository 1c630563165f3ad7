import { DomainError, ForbiddenError, InvalidArgumentError, RateLimitedError, UnauthenticatedError } from '../core/domain.error';
import { ScriptCode, scriptErrorFor } from '../scripts/script.errors';
import { retryAfterSeconds, STATUS_BY_KIND } from './status-by-kind';

describe('STATUS_BY_KIND', () => {
  it('gives each kind of domain error its one status', () => {
    expect(STATUS_BY_KIND).toEqual({
      invalid: 400,
      unauthenticated: 401,
      forbidden: 403,
      'not-found': 404,
      conflict: 409,
      limit: 429,
      unavailable: 503,
    });
  });

  it('answers the platform refusals with the statuses they have always had', () => {
    const statusOf = (err: DomainError) => STATUS_BY_KIND[err.kind];
    expect(statusOf(new UnauthenticatedError('x'))).toBe(401);
    expect(statusOf(new ForbiddenError('x'))).toBe(403);
    expect(statusOf(new RateLimitedError('x', 1000))).toBe(429);
    expect(statusOf(new InvalidArgumentError('x', 'f'))).toBe(400);
    const scripts: Array<[ScriptCode, number]> = [
      [ScriptCode.NOT_FOUND, 404],
      [ScriptCode.ALREADY_EXISTS, 409],
      [ScriptCode.CONFLICT, 409],
      [ScriptCode.LIMIT_EXCEEDED, 429],
      [ScriptCode.INVALID_STATE, 409],
      [ScriptCode.INVALID_ARGUMENT, 400],
    ];
    for (const [code, status] of scripts) expect(statusOf(scriptErrorFor('s', code) as DomainError)).toBe(status);
  });

  it.each([
    [1, '1'],
    [999, '1'],
    [1000, '1'],
    [1001, '2'],
    [2500, '3'],
  ])('Retry-After for %i ms is %s s', (ms, header) => {
    expect(retryAfterSeconds(ms)).toBe(header);
  });
});
