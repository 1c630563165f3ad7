import { applyDecorators, createParamDecorator, ExecutionContext, SetMetadata } from '@nestjs/common';
import { ApiBearerAuth, ApiSecurity } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { ApiErrors } from '../http/error-responses';
import { Caller, CallerKind } from '../http/caller';
import { SECURITY } from '../http/security-schemes';

export const AUTH_KINDS = 'auth:kinds';
export const PUBLIC_ROUTE = 'auth:public';

/**
 * Declares which kinds of caller may use a route (or every route of a
 * controller) and documents the matching Swagger security schemes.
 * Missing or invalid credentials get 401; a valid caller of another kind gets 403.
 */
export function Auth(...kinds: [CallerKind, ...CallerKind[]]) {
  const docs = kinds.map((k) => {
    if (k === 'user') return ApiBearerAuth(SECURITY.user);
    if (k === 'merchant') return ApiSecurity({ [SECURITY.merchant]: [], [SECURITY.merchantSecret]: [] });
    return ApiSecurity(k === 'service' ? SECURITY.service : SECURITY.admin);
  });
  return applyDecorators(
    SetMetadata(AUTH_KINDS, kinds),
    ...docs,
    ApiErrors({
      401: 'Missing or invalid credentials',
      // A route that serves all four kinds refuses none of them.
      ...(new Set(kinds).size < 4 ? { 403: 'Authenticated, but not a caller this endpoint serves' } : {}),
    }),
  );
}

/** A route with no credentials (liveness and readiness probes). Use sparingly. */
export const Public = () => SetMetadata(PUBLIC_ROUTE, true);

/** The authenticated caller of this request. */
export const CurrentCaller = createParamDecorator((_data: unknown, ctx: ExecutionContext): Caller => {
  const req = ctx.getArgByIndex<FastifyRequest>(0);
  if (!req.caller) throw new Error('CurrentCaller used on a route without @Auth');
  return req.caller;
});
