"""actors/broker/transaction."""
