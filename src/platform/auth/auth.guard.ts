import { CanActivate, ExecutionContext, Injectable, Logger } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import { AppConfig } from '../config/app-config';
import { ForbiddenError, RateLimitedError, UnauthenticatedError } from '../core/domain.error';
import { RateLimiter } from '../rate-limit/rate-limiter.service';
import { AUTH_KINDS, PUBLIC_ROUTE } from './auth.decorators';
import { Caller, CallerKind } from '../http/caller';
import { JwtVerifier } from './jwt-verifier.service';
import { MerchantVerifier } from './merchant-verifier.service';
import { SecretMatcher } from './secret-matcher';
import { HEADERS, SECURITY } from '../http/security-schemes';

/** A compact JWS: three base64url parts (the signature may be empty, and is then refused by the verifier). */
const BEARER_ANY_CASE = /^bearer /i;
/** A token pasted with its scheme into a field that adds the scheme (Swagger UI's "Authorize"): `Bearer Bearer eyJ…`. */
const BEARER_TWICE = `Authorization says "Bearer " twice: paste the token alone (Swagger UI's "Authorize" adds "Bearer " for ${SECURITY.user})`;
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** Whether the raw headers (name, value, name, value…) hold Authorization more than once. */
function repeatsAuthorization(raw: string[]): boolean {
  let seen = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    if (name.length === 13 && name.toLowerCase() === 'authorization') {
      if (seen) return true;
      seen = true;
    }
  }
  return false;
}

/**
 * Global guard: every route declares `@Auth(...)` or `@Public()`; a route with
 * neither is refused (fail closed). The guard identifies whichever single
 * credential the request carries, verifies it (401 if missing or invalid),
 * then checks its kind against the route (403 if not allowed).
 */
@Injectable()
export class AuthGuard implements CanActivate {
  private readonly logger = new Logger(AuthGuard.name);
  private readonly services: SecretMatcher;
  private readonly admins: SecretMatcher;
  private readonly policies = new WeakMap<object, 'public' | CallerKind[]>();

  constructor(
    private readonly reflector: Reflector,
    private readonly jwt: JwtVerifier,
    private readonly merchants: MerchantVerifier,
    private readonly limiter: RateLimiter,
    private readonly config: AppConfig,
  ) {
    this.services = new SecretMatcher(config.serviceTokens);
    this.admins = new SecretMatcher(config.adminKeys);
  }

  canActivate(ctx: ExecutionContext): boolean | Promise<boolean> {
    // HTTP-only guard: the request is argument 0 (switchToHttp() would make three closures per call).
    const req = ctx.getArgByIndex<FastifyRequest>(0);
    const policy = this.policyOf(ctx);
    if (policy === 'public') {
      req.caller = { kind: 'anonymous', id: req.ip };
      return true;
    }
    if (policy.length === 0) {
      this.logger.error({ route: req.routeOptions.url }, 'route has no @Auth or @Public; refusing');
      throw new ForbiddenError('This endpoint is not open to any caller');
    }
    const presented = this.presentedKinds(req);
    const kind = presented[0];
    // Bearer tokens, service tokens and admin keys are checked synchronously; only merchant signatures need Redis (the nonce).
    if (presented.length === 1 && kind !== 'merchant') {
      try {
        req.caller = this.authenticateLocally(kind, req);
      } catch (err) {
        return this.refuse(err, req);
      }
      return this.admit(kind, policy);
    }
    return this.authenticateWithRedis(presented, req, policy);
  }

  private async authenticateWithRedis(presented: CallerKind[], req: FastifyRequest, allowed: CallerKind[]): Promise<boolean> {
    try {
      if (presented.length === 0) throw new UnauthenticatedError(`Missing credentials; this endpoint accepts: ${allowed.join(', ')}`);
      if (presented.length > 1) throw new UnauthenticatedError(`Send exactly one kind of credential, got: ${presented.join(', ')}`);
      req.caller = { kind: 'merchant', id: await this.merchants.verify(req, allowed.includes('merchant')) };
    } catch (err) {
      return this.refuse(err, req);
    }
    return this.admit('merchant', allowed);
  }

  private admit(kind: CallerKind, allowed: CallerKind[]): true {
    if (!allowed.includes(kind)) throw new ForbiddenError(`This endpoint is not for ${kind} callers; it accepts: ${allowed.join(', ')}`);
    return true;
  }

  /** Rethrows an authentication failure, after charging a 401 to the caller's IP. */
  private async refuse(err: unknown, req: FastifyRequest): Promise<never> {
    if (err instanceof UnauthenticatedError) await this.chargeFailedAttempt(req.ip);
    throw err;
  }

  /** `'public'`, or the caller kinds the route accepts; read once per handler. */
  private policyOf(ctx: ExecutionContext): 'public' | CallerKind[] {
    const handler = ctx.getHandler();
    let policy = this.policies.get(handler);
    if (policy === undefined) {
      const targets = [handler, ctx.getClass()];
      policy = this.reflector.getAllAndOverride<boolean>(PUBLIC_ROUTE, targets)
        ? 'public'
        : (this.reflector.getAllAndOverride<CallerKind[]>(AUTH_KINDS, targets) ?? []);
      this.policies.set(handler, policy);
    }
    return policy;
  }

  /**
   * Failed authentication is never free: it counts against the anonymous
   * limit of the caller's IP, so credentials cannot be guessed at line rate.
   * Over the limit the answer becomes 429. If Redis cannot count it, the 401 stands.
   */
  private async chargeFailedAttempt(ip: string): Promise<void> {
    const rl = this.config.rateLimit;
    if (!rl.enabled) return;
    const verdict = await this.limiter.take({ kind: 'anonymous', id: ip }, rl.limits.anonymous).catch(() => undefined);
    if (verdict && !verdict.allowed) throw new RateLimitedError('Too many failed authentication attempts', verdict.resetMs);
  }

  private presentedKinds(req: FastifyRequest): CallerKind[] {
    const h = req.headers;
    const kinds: CallerKind[] = [];
    if (h[HEADERS.authorization] !== undefined) kinds.push('user');
    if (h[HEADERS.merchantId] !== undefined || h[HEADERS.signature] !== undefined) kinds.push('merchant');
    if (h[HEADERS.service] !== undefined) kinds.push('service');
    if (h[HEADERS.admin] !== undefined) kinds.push('admin');
    return kinds;
  }

  /** A bearer JWT, service token or admin key: 401 unless valid. */
  private authenticateLocally(kind: Exclude<CallerKind, 'merchant'>, req: FastifyRequest): Caller {
    if (kind === 'user') {
      const header = req.headers.authorization;
      // The scheme is case-insensitive (RFC 9110 §11.1): "bearer" and "BEARER" are the same.
      const token = typeof header === 'string' && (header.startsWith('Bearer ') || BEARER_ANY_CASE.test(header)) ? header.slice(7) : '';
      // One cache lookup for the common case, a token verified before (it had this shape then: only a new one needs the check).
      const known = this.jwt.verifiedSub(token);
      if (known === undefined && BEARER_ANY_CASE.test(token)) throw new UnauthenticatedError(BEARER_TWICE);
      if (known === undefined && (token.length > 8192 || !JWT_SHAPE.test(token))) throw new UnauthenticatedError('Authorization must be "Bearer <JWT>"');
      // Node keeps the first of repeated Authorization headers and drops the others: a request carrying two is refused, not read by its first.
      if (repeatsAuthorization(req.raw.rawHeaders)) throw new UnauthenticatedError('Send one Authorization header');
      return { kind, id: known ?? this.jwt.verifyNew(token) };
    }
    const value = req.headers[kind === 'service' ? HEADERS.service : HEADERS.admin];
    const name = typeof value === 'string' && value.length <= 512 ? (kind === 'service' ? this.services : this.admins).match(value) : undefined;
    if (!name) throw new UnauthenticatedError(kind === 'service' ? 'Invalid service token' : 'Invalid admin key');
    return { kind, id: name };
  }
}
