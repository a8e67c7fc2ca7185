"""actors/broker/clients."""
