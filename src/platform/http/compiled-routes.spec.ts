import {
  BadRequestException,
  Body,
  type CallHandler,
  type CanActivate,
  Controller,
  createParamDecorator,
  type ExecutionContext,
  Get,
  Injectable,
  type NestInterceptor,
  Param,
  type PipeTransform,
  Post,
  Res,
  UseGuards,
  UseInterceptors,
} from '@nestjs/common';
import { GuardsConsumer } from '@nestjs/core/guards/guards-consumer';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import type { FastifyReply } from 'fastify';
import { map } from 'rxjs';
import { compileRoutes } from './compiled-routes';

const seen: string[] = [];
const Caller = createParamDecorator(
  (_: unknown, ctx: ExecutionContext) => ctx.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-who'],
);

@Injectable()
class SyncGuard implements CanActivate {
  canActivate(ctx: ExecutionContext): boolean {
    seen.push(`sync:${ctx.getClass().name}.${ctx.getHandler().name}`);
    return ctx.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-deny'] !== 'sync';
  }
}

@Injectable()
class AsyncGuard implements CanActivate {
  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    await new Promise((r) => setImmediate(r));
    return ctx.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-deny'] !== 'async';
  }
}

/** A pipe that refuses a body without `n`, asynchronously (as class-validator's road does). */
const needsN: PipeTransform = {
  transform: (v: { n?: unknown }) => (typeof v?.n === 'number' ? v : Promise.reject(new BadRequestException('n is required'))),
};

@Injectable()
class Wrap implements NestInterceptor {
  intercept(_: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(map((body: unknown) => ({ wrapped: body })));
  }
}

@Controller('t')
@UseGuards(SyncGuard, AsyncGuard)
class TestController {
  @Post(':id')
  create(@Caller() who: string, @Param('id') id: string, @Body(needsN) body: { n: number }, @Res({ passthrough: true }) reply: FastifyReply) {
    if (body.n === 0) void reply.status(200);
    return { who, id, n: body.n };
  }

  @Get('sync')
  plain() {
    return 'text';
  }

  @Get('wrapped')
  @UseInterceptors(Wrap)
  wrapped() {
    return { ok: true };
  }
}

describe(compileRoutes.name, () => {
  let app: NestFastifyApplication;
  const tryActivate = jest.spyOn(GuardsConsumer.prototype, 'tryActivate');

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({ controllers: [TestController], providers: [SyncGuard, AsyncGuard] }).compile();
    app = moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), { logger: false });
    compileRoutes();
    compileRoutes(); // idempotent
    await app.init();
    await app.getHttpAdapter().getInstance().ready();
  });
  afterAll(() => app.close());
  beforeEach(() => {
    seen.length = 0;
    tryActivate.mockClear();
  });

  const inject = (method: 'GET' | 'POST', url: string, headers: Record<string, string> = {}, body?: object) =>
    app.inject({ method, url, headers: { 'x-who': 'ann', ...headers }, ...(body ? { payload: body } : {}) });

  it('runs the guards, pipes and handler of a route without Nest’s general path, with its default status', async () => {
    const res = await inject('POST', '/t/7', {}, { n: 3 });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual({ who: 'ann', id: '7', n: 3 });
    expect(seen).toEqual(['sync:TestController.create']);
    expect(tryActivate).not.toHaveBeenCalled();
  });

  it('hands the reply over as it is (passthrough): the handler sets the status', async () => {
    const res = await inject('POST', '/t/7', {}, { n: 0 });
    expect(res.statusCode).toBe(200);
  });

  it('refuses with 403 when a guard says no, synchronously or not, and runs no handler', async () => {
    for (const deny of ['sync', 'async']) {
      const res = await inject('POST', '/t/7', { 'x-deny': deny }, { n: 1 });
      expect(res.statusCode).toBe(403);
      expect(res.json()).toMatchObject({ message: 'Forbidden resource' });
    }
  });

  it('answers a pipe’s rejection through the exception filters', async () => {
    const res = await inject('POST', '/t/7', {}, { m: 1 });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ message: 'n is required' });
  });

  it('sends a string as it is', async () => {
    const res = await inject('GET', '/t/sync');
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('text');
  });

  it('leaves a route with interceptors to Nest', async () => {
    const res = await inject('GET', '/t/wrapped');
    expect(res.json()).toEqual({ wrapped: { ok: true } });
    expect(tryActivate).toHaveBeenCalledTimes(1);
  });
});
