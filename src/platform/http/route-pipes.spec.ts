import { Body, createParamDecorator, Param, type PipeTransform, Query } from '@nestjs/common';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import type { ModulesContainer } from '@nestjs/core';
import { pipeRouteParams } from './route-pipes';

const Custom = createParamDecorator(() => 'custom');
const own: PipeTransform = { transform: (v: unknown) => v };

class BaseController {
  inherited(@Body() _body: object) {}
}

class SomeController extends BaseController {
  handle(@Custom() _custom: string, @Body() _body: object, @Query() _query: object, @Param('id') _id: string) {}
}

/** The pipes each parameter of `method` has, by its index. */
function pipesOf(cls: object, method: string): Record<number, unknown[]> {
  const args = Reflect.getMetadata(ROUTE_ARGS_METADATA, cls, method) as Record<string, { index: number; pipes: unknown[] }>;
  return Object.fromEntries(Object.values(args).map((a) => [a.index, a.pipes]));
}

const containerOf = (...controllers: object[]) =>
  new Map([['module', { controllers: new Map(controllers.map((c, i) => [String(i), { metatype: c }])) }]]) as unknown as ModulesContainer;

describe(pipeRouteParams.name, () => {
  const pipe: PipeTransform = { transform: (v: unknown) => v };

  beforeAll(() => {
    pipeRouteParams(containerOf(SomeController), pipe);
    pipeRouteParams(containerOf(SomeController), pipe); // a second call adds nothing
  });

  it('puts the pipe on body, query and path parameters, and not on custom ones', () => {
    expect(pipesOf(SomeController, 'handle')).toEqual({ 0: [], 1: [pipe], 2: [pipe], 3: [pipe] });
  });

  it('pipes an inherited handler on the controller, leaving the parent class as it was', () => {
    expect(pipesOf(SomeController, 'inherited')).toEqual({ 0: [pipe] });
    expect(pipesOf(BaseController, 'inherited')).toEqual({ 0: [] });
  });

  it('runs before the pipes a parameter declares itself', () => {
    class WithOwn {
      handle(@Body(own) _body: object) {}
    }
    pipeRouteParams(containerOf(WithOwn), pipe);
    expect(pipesOf(WithOwn, 'handle')).toEqual({ 0: [pipe, own] });
  });
});
