"""The ``tracker`` command: thin Typer commands over the library."""
