"""The ``tickwork`` command line: argparse and one module per verb; only ``__main__`` imports it."""
