import { Module } from '@nestjs/common';
import { WalletAdminController } from './wallet-admin.controller';
import { WalletController } from './wallet.controller';
import { WalletMetrics } from './wallet.metrics';
import { WalletService } from './wallet.service';
import { WalletStore } from './wallet.store';

/** Wallets of accounts and merchants: balances per currency and a ledger, each credit and debit one idempotent script. */
@Module({
  controllers: [WalletController, WalletAdminController],
  providers: [WalletStore, WalletService, WalletMetrics],
  exports: [WalletService],
})
export class WalletModule {}
