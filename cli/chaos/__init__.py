"""`rocketrio chaos`: faults injected into a running local cluster while a traced workload runs,
then checkers over the client traces (docs/chaos.md). Pure cores: `schedule` (what to inject
when), `checkers` (what the traces prove), `report` (JSON, text, HTML); shells: `targets`
(which processes), `faults` (signals, tc), `workload` (the clients), `runner` (the command)."""
