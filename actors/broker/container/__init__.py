"""The broker container (upstream's BrokerContainer): several brokers in one process."""
