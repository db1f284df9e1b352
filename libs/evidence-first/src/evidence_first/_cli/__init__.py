"""The command line's parts besides its parser: the demo and what both commands print."""
