"""actors/broker/boot."""
