"""The `workbench` command line: one module per command group."""
