import type { PipeTransform } from '@nestjs/common';
import { CUSTOM_ROUTE_ARGS_METADATA, ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import { MetadataScanner, ModulesContainer } from '@nestjs/core';

/** The parameters Nest would hand a global pipe besides custom decorators: body, query, path, files. */
const PIPED = new Set<number>([RouteParamtypes.BODY, RouteParamtypes.QUERY, RouteParamtypes.PARAM, RouteParamtypes.FILE, RouteParamtypes.FILES]);

interface RouteArg {
  index: number;
  data?: unknown;
  pipes: unknown[];
}

/**
 * Puts `pipe` first on every `@Body()`, `@Query()`, `@Param()` and file parameter of every controller, as a global pipe
 * would run there, and nowhere else. A global pipe also runs on each custom parameter (`@CurrentCaller()`), where ours
 * has nothing to do (custom values are not validated), yet Nest still awaits a chain of promises for it on every
 * request: attached per parameter, a custom parameter is handed over as it is. Call before `app.init()`, which reads
 * the parameters' pipes when it registers the routes. It runs before a parameter's own pipes, as a global pipe does,
 * but after controller or method `@UsePipes()` pipes (the service declares none).
 */
export function pipeRouteParams(modules: ModulesContainer, pipe: PipeTransform): void {
  const scanner = new MetadataScanner();
  for (const module of modules.values()) {
    for (const wrapper of module.controllers.values()) {
      const controller = wrapper.metatype as (new (...args: never[]) => unknown) | null;
      if (typeof controller !== 'function') continue;
      for (const method of scanner.getAllMethodNames(controller.prototype)) {
        const args = Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, method) as Record<string, RouteArg> | undefined;
        if (!args) continue;
        const piped: Record<string, RouteArg> = {};
        for (const [key, arg] of Object.entries(args)) {
          const type = key.includes(CUSTOM_ROUTE_ARGS_METADATA) ? undefined : Number(key.split(':')[0]);
          piped[key] = type !== undefined && PIPED.has(type) && !arg.pipes.includes(pipe) ? { ...arg, pipes: [pipe, ...arg.pipes] } : arg;
        }
        // A new object on the controller itself: a parent class's metadata (one it inherits) stays as it was.
        Reflect.defineMetadata(ROUTE_ARGS_METADATA, piped, controller, method);
      }
    }
  }
}
