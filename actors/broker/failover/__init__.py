"""Slave acting master (RIP-32): member groups, escape, pre-online, lock quorum."""
