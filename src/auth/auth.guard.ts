import { CanActivate, ExecutionContext, Injectable, Logger } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import { AppConfig } from '../config/app-config';
import { ApiError, forbidden, rateLimited, unauthorized } from '../http/api-error';
import { RateLimiter } from '../rate-limit/rate-limiter.service';
import { AUTH_KINDS, PUBLIC_ROUTE } from './auth.decorators';
import { Caller, CallerKind } from './caller';
import { JwtVerifier } from './jwt-verifier.service';
import { MerchantVerifier } from './merchant-verifier.service';
import { SecretMatcher } from './secret-matcher';
import { HEADERS } from './security-schemes';

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

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    const targets = [ctx.getHandler(), ctx.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_ROUTE, targets)) {
      req.caller = { kind: 'anonymous', id: req.ip };
      return true;
    }
    const allowed = this.reflector.getAllAndOverride<CallerKind[]>(AUTH_KINDS, targets);
    if (!allowed?.length) {
      this.logger.error({ route: req.routeOptions.url }, 'route has no @Auth or @Public; refusing');
      throw forbidden('This endpoint is not open to any caller');
    }
    const presented = this.presentedKinds(req);
    try {
      if (presented.length === 0) throw unauthorized(`Missing credentials; this endpoint accepts: ${allowed.join(', ')}`);
      if (presented.length > 1) throw unauthorized(`Send exactly one kind of credential, got: ${presented.join(', ')}`);
      req.caller = await this.authenticate(presented[0], req, allowed.includes(presented[0]));
    } catch (err) {
      if (err instanceof ApiError && err.getStatus() === 401) await this.chargeFailedAttempt(req.ip);
      throw err;
    }
    const kind = presented[0];
    if (!allowed.includes(kind)) throw forbidden(`This endpoint is not for ${kind} callers; it accepts: ${allowed.join(', ')}`);
    return true;
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
    if (verdict && !verdict.allowed) throw rateLimited('Too many failed authentication attempts', verdict.resetMs);
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

  private async authenticate(kind: CallerKind, req: FastifyRequest, willServe: boolean): Promise<Caller> {
    switch (kind) {
      case 'user': {
        const m = /^Bearer ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*)$/.exec(String(req.headers.authorization));
        if (!m || m[1].length > 8192) throw unauthorized('Authorization must be "Bearer <JWT>"');
        return { kind, id: this.jwt.verify(m[1]) };
      }
      case 'merchant':
        return { kind, id: await this.merchants.verify(req, willServe) };
      case 'service':
      case 'admin': {
        const value = req.headers[kind === 'service' ? HEADERS.service : HEADERS.admin];
        const name = typeof value === 'string' && value.length <= 512 ? (kind === 'service' ? this.services : this.admins).match(value) : undefined;
        if (!name) throw unauthorized(kind === 'service' ? 'Invalid service token' : 'Invalid admin key');
        return { kind, id: name };
      }
    }
  }
}
