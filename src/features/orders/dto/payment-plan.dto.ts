import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { ArrayMaxSize, ArrayMinSize, ArrayUnique, IsArray, IsIn, IsInt, Max, Min, ValidateNested } from 'class-validator';
import { EachIsObject } from '../../../platform/http/each-object';
import {
  INSTRUCTION_STATUSES,
  PAYMENT_METHODS,
  PLAN_STATUSES,
  REVERSAL_STATUSES,
  type InstructionStatus,
  type PaymentMethod,
  type PlanStatus,
  type ReversalStatus,
} from '../order.types';
import { MAX_AMOUNT } from '../../../platform/core/money';

/** At most one instruction per method, so at most four. */
export const MAX_INSTRUCTIONS = PAYMENT_METHODS.length;

export class InstructionInputDto {
  @ApiProperty({ example: 'balance' })
  @IsIn(PAYMENT_METHODS, { message: `method must be one of ${PAYMENT_METHODS.join(', ')}` })
  method!: PaymentMethod;

  /** Minor units */
  @ApiProperty({ example: 2800 })
  @IsInt()
  @Min(1)
  @Max(MAX_AMOUNT)
  amount!: number;
}

export class CreatePlanDto {
  @ApiProperty({
    description: `The instructions in the order they run: 1-${MAX_INSTRUCTIONS}, each method at most once, amounts adding up to the order amount`,
    // ArrayMaxSize's bound is a constant, which the plugin does not read.
    maxItems: MAX_INSTRUCTIONS,
    example: [
      { method: 'balance', amount: 2800 },
      { method: 'quickpay', amount: 10000 },
    ],
  })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_INSTRUCTIONS)
  @ArrayUnique((i: InstructionInputDto) => i?.method, { message: 'instructions must use each method at most once' })
  @EachIsObject()
  @ValidateNested({ each: true })
  @Type(() => InstructionInputDto)
  instructions!: InstructionInputDto[];
}

export class InstructionDto {
  @ApiProperty({ example: 0 }) index!: number;
  @ApiProperty({ enum: PAYMENT_METHODS, example: 'balance' }) method!: PaymentMethod;
  @ApiProperty({ example: 2800 }) amount!: number;
  @ApiProperty({ enum: INSTRUCTION_STATUSES, example: 'SUCCEEDED' }) status!: InstructionStatus;
  @ApiPropertyOptional({ enum: REVERSAL_STATUSES, description: 'Set on succeeded instructions of a failed plan', example: 'REVERSED' })
  reversal?: ReversalStatus;
}

export class PlanDto {
  @ApiProperty({ example: 'ord_3f9a0c1b2d4e5f60718293a4_p1' }) planId!: string;
  @ApiProperty({ example: 'ord_3f9a0c1b2d4e5f60718293a4' }) orderId!: string;
  @ApiProperty({ enum: PLAN_STATUSES, example: 'PAID' }) status!: PlanStatus;
  @ApiProperty({ example: 12800 }) amount!: number;
  @ApiProperty({ example: 'CNY' }) currency!: string;
  @ApiProperty({ type: [InstructionDto] }) instructions!: InstructionDto[];
  @ApiProperty({ example: 3 }) version!: number;
  @ApiProperty({ example: '2026-11-22T08:31:00.000Z' }) createdAt!: string;
  @ApiPropertyOptional({ description: 'Why a FAILED plan failed', example: 'quickpay declined the payment' }) failureReason?: string;
}
