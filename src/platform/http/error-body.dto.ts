import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

/** The request id every documented example shows. */
export const EXAMPLE_REQUEST_ID = '3f1c0e0a-6a55-4a7e-9d1d-2f8b1c7e9a10';

/**
 * The one body shape of every 4xx and 5xx response. Each documented error
 * response shows its own examples (see `ApiErrors`); these are the schema's.
 */
export class ErrorBodyDto {
  /** The HTTP status, repeated */
  @ApiProperty({ example: 503 })
  statusCode!: number;

  /** Stable machine-readable code: branch on this, not on the message */
  @ApiProperty({ example: 'REDIS_UNAVAILABLE' })
  error!: string;

  /** For people; the wording may change */
  @ApiProperty({ example: 'A backing store is unavailable; retry later' })
  message!: string;

  /** Structured specifics: for VALIDATION_FAILED the fields and their messages; some conflicts add an object (LOCK_CONTENDED: remainingTtlMs) */
  @ApiPropertyOptional({
    oneOf: [
      {
        type: 'array',
        items: {
          type: 'object',
          properties: { field: { type: 'string' }, errors: { type: 'array', items: { type: 'string' } } },
          required: ['field', 'errors'],
        },
      },
      { type: 'object' },
    ],
  })
  details?: unknown;

  /** The request's id (echoed in X-Request-Id), to find its log lines */
  @ApiProperty({ example: EXAMPLE_REQUEST_ID })
  requestId!: string;
}
