import { Controller, Get, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Auth, CurrentCaller } from '../../platform/auth/auth.decorators';
import type { Caller } from '../../platform/http/caller';
import { ApiErrors } from '../../platform/http/error-responses';
import { EntriesQueryDto, WalletDto } from './dto/wallet.dto';
import { WalletService } from './wallet.service';
import { walletView } from './wallet.views';

/** An app user's own wallet. */
@ApiTags('wallet (app)')
@Auth('user')
@ApiErrors({ 400: 'Invalid query; the fields are named', 503: 'Redis unreachable; see Retry-After' })
@Controller('wallet')
export class WalletController {
  constructor(private readonly wallets: WalletService) {}

  @Get()
  @ApiOperation({ summary: 'My balances and my entries, newest first, a page at a time' })
  @ApiOkResponse({ type: WalletDto })
  get(@CurrentCaller() caller: Caller, @Query() q: EntriesQueryDto): Promise<WalletDto> {
    return walletView(this.wallets, { kind: 'account', id: caller.id }, q.cursor, q.limit);
  }
}
