"""The NameServer: `route_info` (pure routing tables) and `namesrv` (the server)."""
