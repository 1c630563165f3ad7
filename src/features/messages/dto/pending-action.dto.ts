import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsObject, IsString } from 'class-validator';
import { IsOptionalField } from '../../../platform/http/optional-field';
import { IsAccountId } from './account-id';
import { PENDING_ACTION_NAMES } from '../pending-action.types';

export class StartPendingActionDto {
  @ApiProperty({ example: 'acc_1001', maxLength: 64 })
  @IsAccountId()
  accountId!: string;

  @ApiProperty({ example: 'PASSWORD_RECOVERY' })
  @IsString()
  @IsIn(PENDING_ACTION_NAMES)
  bizType!: string;

  /** Free-form context kept with the reminder (at most 1 KiB as JSON) */
  @ApiPropertyOptional({ example: { channel: 'sms' } })
  @IsOptionalField()
  @IsObject()
  context?: Record<string, unknown>;
}

export class PendingActionParamDto {
  /** The kind of pending action */
  @IsString()
  @IsIn(PENDING_ACTION_NAMES)
  bizType!: string;

  /** The account the action was started for */
  @ApiProperty({ example: 'acc_1001', maxLength: 64 })
  @IsAccountId()
  accountId!: string;
}

export class PendingActionResultDto {
  @ApiProperty({ description: 'Identifies this start of the action', example: 'b3f1c2d4-...' }) actionId!: string;
  @ApiProperty({ description: 'When the reminder is due unless the action is finished first (epoch ms, Redis clock)', example: 1795302600000 })
  remindAt!: number;
}

export class FinishResultDto {
  @ApiProperty({ description: 'True when the action was pending (so no reminder will be sent)', example: true }) wasPending!: boolean;
}
