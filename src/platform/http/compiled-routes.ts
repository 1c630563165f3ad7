import { type CanActivate, ForbiddenException, type HttpServer, type PipeTransform, RequestMethod } from '@nestjs/common';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import { FORBIDDEN_MESSAGE } from '@nestjs/core/guards/constants';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host';
import { STATIC_CONTEXT } from '@nestjs/core/injector/constants';
import { ParamsTokenFactory } from '@nestjs/core/pipes/params-token-factory';
import { markRejectedByPipes } from '@nestjs/core/router/rejected-by-pipes';
import { RouterExecutionContext } from '@nestjs/core/router/router-execution-context';
import { isObservable, lastValueFrom } from 'rxjs';

/** What `RouterExecutionContext.create` is called with (instance, handler, method name, module, HTTP method, context). */
type CreateArgs = [object, (...args: unknown[]) => unknown, string, string, RequestMethod, object?, string?];
type RouteHandler = (req: object, res: object, next: () => void) => Promise<unknown>;

/** One parameter of a handler, as Nest resolves it. */
interface Param {
  index: number;
  type: RouteParamtypes | string;
  data: unknown;
  metatype?: unknown;
  pipes: PipeTransform[];
  extractValue: (req: object, res: object, next: () => void) => unknown;
}

/** The parts of Nest's RouterExecutionContext a compiled route reads (all made once, when the route is registered). */
interface Internals {
  applicationRef: HttpServer;
  getMetadata(
    instance: object,
    callback: unknown,
    methodName: string,
    moduleKey: string,
    requestMethod: RequestMethod,
    contextType: 'http',
  ): {
    argsLength: number;
    isSseHandler: boolean;
    paramtypes?: unknown[];
    httpStatusCode: number;
    hasCustomHeaders: boolean;
    getParamsMetadata(moduleKey: string): Param[];
  };
  contextUtils: { mergeParamsMetatypes(params: Param[], paramtypes?: unknown[]): Param[]; reflectPassthrough(instance: object, methodName: string): boolean };
  pipesContextCreator: { create(instance: object, callback: unknown, moduleKey: string): PipeTransform[] };
  guardsContextCreator: { create(instance: object, callback: unknown, moduleKey: string): CanActivate[] };
  interceptorsContextCreator: { create(instance: object, callback: unknown, moduleKey: string): unknown[] };
  reflectRedirect(callback: unknown): unknown;
  reflectRenderTemplate(callback: unknown): unknown;
  isPipeable(type: RouteParamtypes | string): boolean;
}

const PATCHED = Symbol.for('redis-pay:compiled-routes');
const tokens = new ParamsTokenFactory();
const isThenable = (v: unknown): v is PromiseLike<unknown> => typeof (v as PromiseLike<unknown> | null)?.then === 'function';

/**
 * Compiles each route's guards, parameter pipes, handler call and reply into one function, made once when the route
 * is registered, in place of Nest's general one. Nest's runs every guard, every parameter's pipes and the reply in
 * async functions of their own (a chain of a dozen promises per request, a `Promise.all` over the parameters even
 * when no pipe does anything asynchronous); the compiled one does the same steps in the same order and awaits only
 * what is a promise. What a route does is unchanged: the same guards and pipes (the global validation pipe first,
 * class-validator behind it), the same execution context for the guards, the same status (201 for POST unless the
 * handler sets one), the reply through the Fastify adapter, errors to the exception filters by Nest's own proxy.
 *
 * A route with anything the compiled form does not model keeps Nest's function: interceptors, server-sent events,
 * redirects, templates, `@Header()`, a response handled by the handler itself (`@Res()` without passthrough,
 * `@Next()`), a request-scoped controller. Call before `app.init()`, which registers the routes; idempotent.
 */
export function compileRoutes(): void {
  const proto = RouterExecutionContext.prototype as unknown as Record<PropertyKey, unknown> & { create: (...args: CreateArgs) => RouteHandler };
  if (proto[PATCHED]) return;
  proto[PATCHED] = true;
  const general = proto.create;
  proto.create = function (this: RouterExecutionContext, ...args: CreateArgs): RouteHandler {
    const route = general.apply(this, args);
    return compile(this as unknown as Internals, args) ?? route;
  };
}

function compile(ctx: Internals, [instance, callback, methodName, moduleKey, requestMethod, contextId]: CreateArgs): RouteHandler | undefined {
  if (contextId !== undefined && contextId !== STATIC_CONTEXT) return undefined;
  const meta = ctx.getMetadata(instance, callback, methodName, moduleKey, requestMethod, 'http');
  if (meta.isSseHandler || meta.hasCustomHeaders || ctx.reflectRedirect(callback) || ctx.reflectRenderTemplate(callback)) return undefined;
  if (ctx.interceptorsContextCreator.create(instance, callback, moduleKey).length > 0) return undefined;
  const declared = meta.getParamsMetadata(moduleKey);
  const handlesResponse = declared.some((p) => p.type === RouteParamtypes.RESPONSE || p.type === RouteParamtypes.NEXT);
  if (handlesResponse && !ctx.contextUtils.reflectPassthrough(instance, methodName)) return undefined;

  const routePipes = ctx.pipesContextCreator.create(instance, callback, moduleKey);
  const params = ctx.contextUtils.mergeParamsMetatypes(declared, meta.paramtypes).map((p) => {
    const pipeable = ctx.isPipeable(p.type);
    const pipes = pipeable ? [...routePipes, ...p.pipes] : [];
    return {
      index: p.index,
      extract: p.extractValue,
      pipeable,
      pipes,
      metadata: { metatype: p.metatype, type: tokens.exchangeEnumForString(p.type as RouteParamtypes), data: p.data },
    };
  });
  const guards = ctx.guardsContextCreator.create(instance, callback, moduleKey);
  const { argsLength, httpStatusCode: status } = meta;
  const app = ctx.applicationRef;
  const controller = instance.constructor as new () => unknown;

  /** A parameter's value through its pipes, in order; a promise only when a pipe answers with one. */
  const piped = (value: unknown, pipes: PipeTransform[], metadata: (typeof params)[number]['metadata']): unknown => {
    let v = value;
    for (let i = 0; i < pipes.length; i++) {
      if (isThenable(v)) return pipeRest(v, pipes, i, metadata);
      v = pipes[i].transform(v, metadata as never);
    }
    return v;
  };
  const pipeRest = async (v: PromiseLike<unknown>, pipes: PipeTransform[], from: number, metadata: (typeof params)[number]['metadata']) => {
    let value: unknown = await v;
    for (let i = from; i < pipes.length; i++) value = await pipes[i].transform(value, metadata as never);
    return value;
  };

  /** The guards from `from` on, once one answered with a promise or an Observable (`verdict`): each in turn, as Nest does. */
  const activate = async (context: ExecutionContextHost, verdict: unknown, from: number): Promise<void> => {
    for (let i = from; ; i++) {
      let ok = await verdict;
      if (isObservable(ok)) ok = await lastValueFrom(ok);
      if (!ok) throw new ForbiddenException(FORBIDDEN_MESSAGE);
      if (i + 1 >= guards.length) return;
      verdict = guards[i + 1].canActivate(context);
    }
  };

  const run = async (req: object, res: object, next: () => void): Promise<unknown> => {
    const args: unknown[] = new Array<unknown>(argsLength).fill(undefined);
    const pending: PromiseLike<unknown>[] = [];
    try {
      for (const p of params) {
        // The request, the reply (a thenable: Fastify's Reply) and the like are handed over as they are; what Nest pipes,
        // it awaits when it is a promise.
        if (!p.pipeable) {
          args[p.index] = p.extract(req, res, next);
          continue;
        }
        const value = piped(p.extract(req, res, next), p.pipes, p.metadata);
        if (isThenable(value)) pending.push(value.then((v) => (args[p.index] = v)));
        else args[p.index] = value;
      }
      // As Nest's Promise.all over the parameters: the first rejection is the answer.
      if (pending.length > 0) await Promise.all(pending);
    } catch (err) {
      markRejectedByPipes(req);
      throw err;
    }
    let result = callback.apply(instance, args);
    if (isThenable(result)) result = await result;
    if (isObservable(result)) result = await lastValueFrom(result);
    await app.reply(res, result, undefined);
    return res;
  };

  const start = (req: object, res: object, next: () => void): Promise<unknown> => {
    app.status(res, status);
    return run(req, res, next);
  };

  // Not async itself: with every guard answering `true` at once (the usual case), no promise is made before `run`.
  return (req, res, next) => {
    if (guards.length > 0) {
      const context = new ExecutionContextHost([req, res, next], controller, callback);
      context.setType('http');
      for (let i = 0; i < guards.length; i++) {
        const verdict = guards[i].canActivate(context);
        if (verdict === true) continue;
        if (verdict === false) throw new ForbiddenException(FORBIDDEN_MESSAGE);
        return activate(context, verdict, i).then(() => start(req, res, next));
      }
    }
    return start(req, res, next);
  };
}
