"""The web console (`rocketrio console`): `poller` reads the cluster, `view` works out what
changed (pure), `hub` fans it out to the viewers with bounded backlogs, `actions` carries out
token-guarded admin actions, `protocol` types the websocket messages, `server` serves the page
and the websocket on one port; the page itself is in `static/`."""
