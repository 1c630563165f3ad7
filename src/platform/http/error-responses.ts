import { applyDecorators, Logger } from '@nestjs/common';
import { ApiResponse, type ExampleObject, type HeadersObject } from '@nestjs/swagger';
import { toErrorResponse, type ErrorResponse } from './all-exceptions.filter';
import { ErrorBodyDto, EXAMPLE_REQUEST_ID } from './error-body.dto';

/** A documented error status with the errors a route really throws for it (each answered as the filter answers it), shown as examples. */
export interface ErrorsThrown {
  description: string;
  errors: [Error, ...Error[]];
}

/**
 * The error responses of a route or a controller. Statuses given as a
 * description get their examples when the document is built, from what the
 * route is (`addErrorExamples` in swagger.ts): 400 from its DTOs, 401 and 403
 * from its security, 429 from the rate limits, 503 from the Redis outage
 * error. 404 and 409 name the errors the route throws.
 */
export interface ErrorResponses {
  400?: string;
  401?: string;
  403?: string;
  404?: ErrorsThrown;
  409?: ErrorsThrown;
  429?: string;
  503?: string;
}

export const RETRY_AFTER_HEADER: HeadersObject = {
  'Retry-After': { description: 'Whole seconds to wait before retrying', schema: { type: 'integer', minimum: 1 } },
};

const logger = new Logger('OpenAPI');

/** What the service answers for `err` (the exception filter's own code path). */
const answerTo = (err: unknown, retryAfterS = 1): ErrorResponse => toErrorResponse(err, EXAMPLE_REQUEST_ID, retryAfterS, logger);

/** The body the service answers for `err`, as an example. */
export function errorExample(err: unknown, summary: string, retryAfterS = 1): ExampleObject {
  return { summary, value: answerTo(err, retryAfterS).body };
}

/** Examples keyed by error code (`ORDER_PAID`, then `ORDER_PAID_2` for a second one). */
function examplesOf(errors: Error[]): Record<string, ExampleObject> {
  const out: Record<string, ExampleObject> = {};
  for (const err of errors) {
    const { error, message } = answerTo(err).body;
    let key = error;
    for (let n = 2; key in out; n++) key = `${error}_${n}`;
    out[key] = errorExample(err, message);
  }
  return out;
}

/**
 * Declares error responses, all with the one error body (`ErrorBodyDto`).
 * This is the only way routes declare them, so every one gets examples.
 */
export function ApiErrors(responses: ErrorResponses): MethodDecorator & ClassDecorator {
  return applyDecorators(
    ...Object.entries(responses).map(([code, spec]: [string, string | ErrorsThrown]) => {
      const status = Number(code);
      const { description, errors } = typeof spec === 'string' ? { description: spec, errors: [] } : spec;
      const retries = status === 429 || status === 503 || errors.some((e) => 'retry-after' in answerTo(e).headers);
      return ApiResponse({
        status,
        type: ErrorBodyDto,
        description,
        ...(errors.length > 0 ? { examples: examplesOf(errors) } : {}),
        ...(retries ? { headers: RETRY_AFTER_HEADER } : {}),
      });
    }),
  );
}
