#!/usr/bin/env python3
"""Django's command-line utility for the tickwork recipe (docs/recipes.md)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "site_config.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
