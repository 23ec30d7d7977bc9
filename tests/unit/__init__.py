"""Unit tests, one folder per package, one file per module or concept."""
