import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { AuthGuard } from './auth.guard';
import { JwtVerifier } from './jwt-verifier.service';
import { MerchantVerifier } from './merchant-verifier.service';

/** The identity layer: registers `AuthGuard` globally. Routes opt in with `@Auth(...)`. */
@Module({
  providers: [JwtVerifier, MerchantVerifier, { provide: APP_GUARD, useClass: AuthGuard }],
  exports: [JwtVerifier],
})
export class AuthModule {}
