import { applyDecorators } from '@nestjs/common';
import { ApiBadRequestResponse, ApiServiceUnavailableResponse, ApiTooManyRequestsResponse } from '@nestjs/swagger';
import { IsString, Matches, MaxLength } from 'class-validator';
import { ErrorBodyDto } from '../http/error-body.dto';

/** The error responses every orders route shares: 400 (fields named, nothing stored), 429, 503 (safe to retry). */
export const OrdersErrorResponses = (badRequest: string) =>
  applyDecorators(
    ApiBadRequestResponse({ type: ErrorBodyDto, description: `${badRequest}; the fields are named and nothing is stored` }),
    ApiTooManyRequestsResponse({ type: ErrorBodyDto, description: 'Rate limited; see Retry-After' }),
    ApiServiceUnavailableResponse({ type: ErrorBodyDto, description: 'Redis unreachable (locks fail closed); see Retry-After. Retrying is safe.' }),
  );

/** A string id of at most `maxLength` characters matching `re`. */
export const IsIdString = (maxLength: number, re: RegExp, message: string) => applyDecorators(IsString(), MaxLength(maxLength), Matches(re, { message }));
