import { Module } from '@nestjs/common';
import { StreamRunners } from './stream-runners.service';
import { StreamsMetrics } from './streams.metrics';

/** Redis Streams consumer groups for any feature: import it and start runners with StreamRunners. */
@Module({
  providers: [StreamRunners, StreamsMetrics],
  exports: [StreamRunners],
})
export class StreamsModule {}
