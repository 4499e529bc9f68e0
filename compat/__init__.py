"""Tooling for the compatibility matrix (torch x CANN x Python).

    python -m compat render     # regenerate COMPATIBILITY.en.md and the tables core ships
    python -m compat check      # fail if the tree disagrees with the data
    python -m compat rows       # the rows as JSON (the noxfile reads them)

See matrix.toml for the data and its rules.
"""
