"""The `mbfg` command line."""
