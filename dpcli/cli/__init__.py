"""The command-line layer: parse options, call the library, render results.

Each command lives in its own short module; ``app.py`` wires them. Heavy
modules (numpy, pandas, pyarrow) are imported inside commands so that
``dpcli --help`` answers quickly.
"""
