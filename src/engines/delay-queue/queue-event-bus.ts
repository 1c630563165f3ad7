import type { RedisClient } from '../../platform/redis/redis.service';

/**
 * The queues' pub/sub channels on the one subscriber connection: a single
 * 'message' listener that hands each message to the processor of its channel
 * (one listener however many queues, so no MaxListeners warnings).
 * ioredis subscribes again by itself after a reconnect.
 */
export class QueueEventBus {
  private readonly handlers = new Map<string, (message: string) => void>();

  constructor(private readonly subscriber: RedisClient) {
    subscriber.on('message', (channel: string, message: string) => this.handlers.get(channel)?.(message));
  }

  async subscribe(channel: string, handler: (message: string) => void): Promise<void> {
    this.handlers.set(channel, handler);
    await this.subscriber.subscribe(channel);
  }

  async unsubscribe(channel: string): Promise<void> {
    this.handlers.delete(channel);
    await this.subscriber.unsubscribe(channel);
  }
}
