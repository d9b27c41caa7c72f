"""`logwheel`, the command line: argument parsing and calls into the packages, nothing else.

May import: everything.
"""
