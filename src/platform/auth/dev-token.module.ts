import { Module } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import { DevTokenController } from './dev-token.controller';

/** The development-only routes (`POST /dev/token`). */
@Module({ controllers: [DevTokenController] })
export class DevTokenModule {}

/** Whether a service with this configuration serves the development routes: not in production, and only with HS256 tokens. */
export const servesDevRoutes = (config: AppConfig): boolean => config.env !== 'production' && config.jwt.algorithm === 'HS256';
