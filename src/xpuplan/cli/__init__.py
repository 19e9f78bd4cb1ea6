"""Command-line front end (Typer + Rich); no model logic lives here."""
