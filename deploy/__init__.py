"""Ready configs per deployment mode (upstream key=value files), shipped as package data.

Each folder is one deployment. Every file works as is with ``rocketrio <role> -c
deploy/<mode>/<file>`` from the repository root (relative paths are relative to the working
directory), and ``rocketrio up --mode <mode>`` writes its configs from the folder of the same name,
substituting only host, ports and directories (`rocketrio.cli.up_plan`): one source of truth.
"""
