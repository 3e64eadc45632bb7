"""The NodeNumber guest: WAT source, build script and compiled module (package data)."""
