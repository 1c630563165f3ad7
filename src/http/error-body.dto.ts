import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

/** The one body shape of every 4xx and 5xx response. */
export class ErrorBodyDto {
  @ApiProperty({ example: 400 })
  statusCode!: number;

  @ApiProperty({ example: 'VALIDATION_FAILED', description: 'Stable machine-readable error code' })
  error!: string;

  @ApiProperty({ example: 'amount must not be greater than 100000000' })
  message!: string;

  @ApiPropertyOptional({
    description: 'Structured specifics, e.g. the fields that failed validation',
    example: [{ field: 'amount', errors: ['amount must not be greater than 100000000'] }],
  })
  details?: unknown;

  @ApiProperty({ example: '3f1c0e0a-6a55-4a7e-9d1d-2f8b1c7e9a10' })
  requestId!: string;
}
