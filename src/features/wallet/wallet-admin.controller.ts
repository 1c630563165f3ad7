import { Body, Controller, Get, Param, Post, Query, Res } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Auth } from '../../platform/auth/auth.decorators';
import { ApiErrors } from '../../platform/http/error-responses';
import { EntriesQueryDto, OwnerIdParamDto, TopUpDto, TopUpResultDto, WalletDto } from './dto/wallet.dto';
import { parseOwner } from './wallet.keys';
import { BalanceLimitError, ReferenceReusedError } from './wallet.errors';
import { WalletService } from './wallet.service';
import { walletView } from './wallet.views';

/** Ops: any wallet (an account's or a merchant's), and top-ups. */
@ApiTags('ops: wallets')
@Auth('admin')
@ApiErrors({ 400: 'Invalid path, query or body; the fields are named and nothing is stored', 503: 'Redis unreachable; see Retry-After' })
@Controller('admin/wallets')
export class WalletAdminController {
  constructor(private readonly wallets: WalletService) {}

  @Post(':ownerId/top-ups')
  @ApiOperation({ summary: 'Top up a wallet, once per reference (ownerId: account:<id> or merchant:<id>)' })
  @ApiCreatedResponse({ type: TopUpResultDto, description: 'Applied' })
  @ApiOkResponse({ type: TopUpResultDto, description: 'This reference had been applied before: nothing moved' })
  @ApiErrors({
    409: {
      description: 'REFERENCE_REUSED: the reference was applied with another amount or currency; BALANCE_LIMIT: the balance would pass 2^53 − 1',
      errors: [new ReferenceReusedError(), new BalanceLimitError()],
    },
  })
  async topUp(@Param() p: OwnerIdParamDto, @Body() dto: TopUpDto, @Res({ passthrough: true }) reply: FastifyReply): Promise<TopUpResultDto> {
    const r = await this.wallets.credit({ owner: parseOwner(p.ownerId)!, kind: 'top-up', ...dto });
    void reply.status(r.applied ? 201 : 200);
    return { applied: r.applied, entryId: r.entryId, currency: dto.currency, balance: r.balance };
  }

  @Get(':ownerId')
  @ApiOperation({ summary: 'A wallet’s balances and entries, newest first, a page at a time (ownerId: account:<id> or merchant:<id>)' })
  @ApiOkResponse({ type: WalletDto })
  get(@Param() p: OwnerIdParamDto, @Query() q: EntriesQueryDto): Promise<WalletDto> {
    return walletView(this.wallets, parseOwner(p.ownerId)!, q.cursor, q.limit);
  }
}
