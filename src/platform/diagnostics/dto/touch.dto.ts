import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsInt, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { IsOptionalField } from '../../http/optional-field';

export class TouchDto {
  /** What the visit is for; letters, digits, - and _ */
  @ApiProperty({ example: 'home' })
  @IsString()
  @MaxLength(32)
  @Matches(/^[A-Za-z0-9_-]+$/)
  label!: string;

  /** How long to remember the visits, in seconds */
  @ApiPropertyOptional({ default: 3600 })
  @IsOptionalField()
  @IsInt()
  @Min(1)
  @Max(86400)
  ttlSeconds?: number;
}

export class TouchResultDto {
  @ApiProperty({ example: 'acc_1001' })
  accountId!: string;

  @ApiProperty({ example: 'home' })
  label!: string;

  @ApiProperty({ description: 'Visits so far, including this one', example: 3 })
  count!: number;

  @ApiProperty({ description: 'Redis server time of this visit (ms since the epoch)', example: 1795302000000 })
  serverTimeMs!: number;
}

export class WhoAmIDto {
  @ApiProperty({ enum: ['user', 'merchant', 'service', 'admin'] })
  kind!: string;

  @ApiProperty({ description: 'Account id, merchant id, service name or admin key name', example: 'acc_1001' })
  id!: string;
}
