"""The proxy: RocketMQ 5's gRPC MessagingService in front of rocketrio's brokers."""
