import { Module } from '@nestjs/common';
import { DiagnosticsController } from './diagnostics.controller';
import { DiagnosticsService } from './diagnostics.service';

@Module({ controllers: [DiagnosticsController], providers: [DiagnosticsService] })
export class DiagnosticsModule {}
